#include "server/tool_request.h"

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

void prefix_rules(std::vector<grammar::SpecAlternative>& alts, const std::string& prefix) {
    for (auto& alt : alts)
        for (auto& item : alt.items) {
            if (item.kind == grammar::SpecItem::Kind::rule) item.rule = prefix + item.rule;
            else if (item.kind == grammar::SpecItem::Kind::group) prefix_rules(item.alternatives, prefix);
        }
}

// GBNF for the text before and after one call's arguments, and between calls.
struct CallSyntax {
    std::string open, close, first, separator, last;
};

CallSyntax syntax(chat::ToolCallFormat format) {
    switch (format) {
        case chat::ToolCallFormat::hermes:
            return {R"("<tool_call>\n{\"name\": \"NAME\", \"arguments\": ")", R"("}\n</tool_call>")", "", R"("\n")", ""};
        case chat::ToolCallFormat::mistral:
            // [TOOL_CALLS] is a control token in Mistral vocabularies: the parser takes a bare array.
            return {R"("{\"name\": \"NAME\", \"arguments\": ")", R"("}")", R"("[")", R"(", ")", R"("]")"};
        case chat::ToolCallFormat::llama3_json:
            return {R"("{\"name\": \"NAME\", \"parameters\": ")", R"("}")", "", R"("; ")", ""};
    }
    return {};
}

}  // namespace

std::shared_ptr<const grammar::Grammar> tool_call_grammar(chat::ToolCallFormat format, const json& tools,
                                                          const std::string& only, bool parallel) {
    const std::string key = fmt::format("tools:{}:{}:{}:{}", chat::tool_call_format_name(format), only, parallel, tools.dump());
    return grammar::GrammarCache::shared().get(key, [&] {
        const CallSyntax s = syntax(format);
        std::string wrapper = "root ::= " + s.first + " call " +
                              (parallel ? "(" + s.separator + " call)* " : std::string()) + s.last + "\ncall ::= ";
        std::vector<grammar::SpecRule> rules;
        size_t n = 0;
        for (size_t i = 0; i < tools.size(); ++i) {
            const json& fn = tools[i]["function"];
            const std::string name = fn["name"].get<std::string>();
            if (!only.empty() && name != only) continue;
            const std::string prefix = fmt::format("tool{}-", i);
            const json schema = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                                         : json{{"type", "object"}};
            grammar::GrammarSpec spec;
            try {
                spec = grammar::parse_gbnf_spec(grammar::json_schema_to_gbnf(schema));
            } catch (const grammar::SchemaError& e) {
                const std::string param = fmt::format("tools[{}].function.parameters", i);
                throw ApiError::invalid(fmt::format("'{}' cannot be enforced: {}", param, e.what()), param,
                                        "unsupported_parameter");
            }
            for (auto& rule : spec.rules) {
                rule.name = prefix + rule.name;
                prefix_rules(rule.alternatives, prefix);
                rules.push_back(std::move(rule));
            }
            std::string open = s.open;
            open.replace(open.find("NAME"), 4, name);  // names are [A-Za-z0-9_-] (checked when parsed)
            wrapper += (n++ ? " | " : "") + open + " " + prefix + spec.root + " " + s.close;
        }
        grammar::GrammarSpec all = grammar::parse_gbnf_spec(wrapper + "\n");
        for (auto& rule : rules) all.rules.push_back(std::move(rule));
        return grammar::Grammar::compile(all);
    });
}

std::optional<chat::ToolCallFormat> apply_tools(CompletionParams& p, const chat::ChatTemplate* chat_template) {
    if (p.endpoint != Endpoint::chat_completions || p.tools.is_null() || p.tools.empty()) return std::nullopt;
    const auto format = chat_template ? chat::detect_tool_call_format(chat_template->source()) : std::nullopt;
    if (!format)
        throw ApiError::invalid("'tools' need a chat template that renders them (Hermes/Qwen <tool_call>, Llama 3.1 "
                                "JSON or Mistral [TOOL_CALLS]); this server's template has none",
                                "tools", "unsupported_parameter");
    if (p.tool_choice == ToolChoice::none) return std::nullopt;
    if (p.tool_choice == ToolChoice::required || p.tool_choice == ToolChoice::function)
        p.grammar = tool_call_grammar(*format, p.tools, p.tool_choice_function, p.parallel_tool_calls);
    return format;
}

}  // namespace pagoda::server
