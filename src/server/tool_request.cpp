#include "server/tool_request.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;  // tool schemas keep their properties' order

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
        case chat::ToolCallFormat::qwen3_coder:  // the arguments are XML parameters (xml_parameters)
            return {R"("<tool_call>\n<function=NAME>\n")", R"("</function>\n</tool_call>")", "", R"("\n")", ""};
        case chat::ToolCallFormat::minimax_m2:  // XML parameters too, one call a block
            return {R"("<minimax:tool_call>\n<invoke name=\"NAME\">\n")", R"("</invoke>\n</minimax:tool_call>")", "",
                    R"("\n")", ""};
        case chat::ToolCallFormat::deepseek_v3:
            return {R"("<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n")", R"("\n```<｜tool▁call▁end｜>")",
                    R"("<｜tool▁calls▁begin｜>")", R"("\n")", R"("<｜tool▁calls▁end｜>")"};
        case chat::ToolCallFormat::gemma4:
            // The arguments as JSON (the parser reads JSON's quoted keys and strings beside Gemma's notation).
            return {R"("<|tool_call>call:NAME")", R"("<tool_call|>")", "", "", ""};
        case chat::ToolCallFormat::harmony:
            // The generation prompt ends with <|start|>assistant; later calls are new messages.
            return {R"("<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>")", R"("<|call|>")", "",
                    R"("<|start|>assistant")", ""};
    }
    return {};
}

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out + "\"";
}

// The rules of one schema (compiled by grammar/json_schema) under `prefix`; returns its root's name.
std::string add_schema_rules(const json& schema, const std::string& prefix, const std::string& param,
                             std::vector<grammar::SpecRule>& rules) {
    grammar::GrammarSpec spec;
    try {
        spec = grammar::parse_gbnf_spec(grammar::json_schema_to_gbnf(schema));
    } catch (const grammar::SchemaError& e) {
        throw ApiError::invalid(fmt::format("'{}' cannot be enforced: {}", param, e.what()), param, "unsupported_parameter");
    }
    for (auto& rule : spec.rules) {
        rule.name = prefix + rule.name;
        prefix_rules(rule.alternatives, prefix);
        rules.push_back(std::move(rule));
    }
    return prefix + spec.root;
}

// Qwen3-Coder's arguments: each property of the schema, in its order (the required ones always,
// the others optionally), as <parameter=P>\nVALUE\n</parameter>\n (MiniMax-M2's: <parameter
// name="P">VALUE</parameter>\n). A string property's VALUE is
// text without '<' (the parser takes it verbatim; an enum of strings is one of them, other string
// keywords are not enforced); any other's is its JSON under the property's schema (with the
// schema's $defs). Returns the GBNF of the sequence and adds the rules it uses.
std::string xml_parameters(chat::ToolCallFormat format, const json& schema, const std::string& prefix,
                           const std::string& param, std::string& extra_gbnf, std::vector<grammar::SpecRule>& rules) {
    const bool minimax = format == chat::ToolCallFormat::minimax_m2;
    const auto props = schema.find("properties");
    if (props == schema.end() || !props->is_object() || props->empty()) return "";
    std::vector<std::string> required;
    if (auto r = schema.find("required"); r != schema.end() && r->is_array())
        for (const json& name : *r)
            if (name.is_string()) required.push_back(name.get<std::string>());
    std::string seq;
    size_t k = 0;
    for (auto it = props->begin(); it != props->end(); ++it, ++k) {
        const json& prop = *it;
        const auto type = prop.is_object() ? prop.find("type") : prop.end();
        const bool text = !prop.is_object() || type == prop.end() || *type == "string";
        std::string value;
        const auto choices = prop.is_object() ? prop.find("enum") : prop.end();
        if (text && choices != prop.end() && choices->is_array() && !choices->empty() &&
            std::all_of(choices->begin(), choices->end(), [](const json& c) { return c.is_string(); })) {
            for (const json& c : *choices) value += (value.empty() ? "(" : " | ") + gbnf_literal(c.get<std::string>());
            value += ")";
        } else if (text) {
            value = "xml-text";
        } else {
            json sub = prop;
            for (const char* defs : {"$defs", "definitions"})
                if (auto d = schema.find(defs); d != schema.end()) sub[defs] = *d;
            value = add_schema_rules(sub, fmt::format("{}p{}-", prefix, k), fmt::format("{}.properties.{}", param, it.key()),
                                     rules);
        }
        const std::string rule = fmt::format("{}param{}", prefix, k);
        const std::string open = minimax ? "<parameter name=\"" + it.key() + "\">" : "<parameter=" + it.key() + ">\n";
        extra_gbnf += fmt::format("{} ::= {} {} {}\n", rule, gbnf_literal(open), value,
                                  gbnf_literal(minimax ? "</parameter>\n" : "\n</parameter>\n"));
        const bool needed = std::find(required.begin(), required.end(), it.key()) != required.end();
        seq += " " + rule + (needed ? "" : "?");
    }
    return seq;
}

}  // namespace

std::shared_ptr<const grammar::Grammar> tool_call_grammar(chat::ToolCallFormat format, const json& tools,
                                                          const std::string& only, bool parallel) {
    const std::string key = fmt::format("tools:{}:{}:{}:{}", chat::tool_call_format_name(format), only, parallel, tools.dump());
    return grammar::GrammarCache::shared().get(key, [&] {
        const CallSyntax s = syntax(format);
        std::string wrapper = "root ::= " + s.first + " call " +
                              (parallel ? "(" + s.separator + " call)* " : std::string()) + s.last + "\ncall ::= ";
        std::string extra = "xml-text ::= [^<]*\n";
        std::vector<grammar::SpecRule> rules;
        size_t n = 0;
        for (size_t i = 0; i < tools.size(); ++i) {
            const json& fn = tools[i]["function"];
            const std::string name = fn["name"].get<std::string>();
            if (!only.empty() && name != only) continue;
            const std::string prefix = fmt::format("tool{}-", i);
            const json schema = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                                         : json{{"type", "object"}};
            const std::string param = fmt::format("tools[{}].function.parameters", i);
            const bool xml = format == chat::ToolCallFormat::qwen3_coder || format == chat::ToolCallFormat::minimax_m2;
            const std::string arguments = xml ? xml_parameters(format, schema, prefix, param, extra, rules)
                                              : add_schema_rules(schema, prefix, param, rules);
            std::string open = s.open;
            open.replace(open.find("NAME"), 4, name);  // names are [A-Za-z0-9_-] (checked when parsed)
            wrapper += (n++ ? " | " : "") + open + " " + arguments + " " + s.close;
        }
        wrapper += "\n" + extra;
        grammar::GrammarSpec all = grammar::parse_gbnf_spec(wrapper);
        for (auto& rule : rules) all.rules.push_back(std::move(rule));
        return grammar::Grammar::compile(all);
    });
}

std::optional<chat::ToolCallFormat> apply_tools(CompletionParams& p, const chat::ChatTemplate* chat_template) {
    if (p.endpoint != Endpoint::chat_completions || p.tools.is_null() || p.tools.empty()) return std::nullopt;
    const auto format = chat_template ? chat::detect_tool_call_format(chat_template->source()) : std::nullopt;
    if (!format)
        throw ApiError::invalid("'tools' need a chat template that renders them (Hermes/Qwen <tool_call>, Qwen3-Coder "
                                "<function=…>, Llama 3.1 JSON, Mistral [TOOL_CALLS], DeepSeek V3 <｜tool▁calls▁begin｜>, "
                                "Gemma 4 <|tool_call>, MiniMax-M2 <minimax:tool_call> or gpt-oss harmony); this "
                                "server's template has none",
                                "tools", "unsupported_parameter");
    if (p.tool_choice == ToolChoice::none) return std::nullopt;
    if (p.tool_choice == ToolChoice::required || p.tool_choice == ToolChoice::function)
        p.grammar = tool_call_grammar(*format, p.tools, p.tool_choice_function, p.parallel_tool_calls);
    return format;
}

}  // namespace pagoda::server
