// Structured output of /v1/completions and /v1/chat/completions (openai_request_parts.h): OpenAI's
// response_format, llama-server's json_schema and grammar, vLLM's guided_json / guided_choice /
// guided_regex / guided_grammar. Each becomes one grammar every choice is constrained to.
#include <fmt/format.h>

#include "core/json_reader.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_gbnf.h"
#include "server/api_error.h"
#include "server/openai_request_parts.h"

namespace pagoda::server::openai_fields {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace json_reader;

// Fields that each set the grammar; a request may give one of them.
constexpr const char* kGrammarFields = "'response_format', 'json_schema', 'guided_json', 'guided_choice', "
                                       "'guided_regex', 'guided_grammar' and 'grammar'";

// Compiled from the ordered form: properties are generated in the order the schema holds them.
std::shared_ptr<const grammar::Grammar> schema_grammar(const ojson& schema, const std::string& param) {
    try {
        return grammar::GrammarCache::shared().get("schema:" + schema.dump(),
                                                   [&] { return grammar::compile_json_schema(schema); });
    } catch (const grammar::SchemaError& e) {
        throw ApiError::invalid(fmt::format("'{}' cannot be enforced: {}", param, e.what()), param,
                                "unsupported_parameter");
    }
}

// A GBNF text (llama.cpp's `grammar`, vLLM's `guided_grammar`, or one built here).
std::shared_ptr<const grammar::Grammar> gbnf_grammar(const std::string& text, const std::string& param,
                                                     const std::string& what) {
    try {
        return grammar::GrammarCache::shared().get("gbnf:" + text, [&] { return grammar::parse_gbnf(text); });
    } catch (const Error& e) {
        throw ApiError::invalid(fmt::format("'{}' is not {}: {}", param, what, e.what()), param, "invalid_value");
    }
}

// A GBNF string literal of `s`: quotes, backslashes and control characters escaped, UTF-8 as is.
std::string gbnf_literal(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
        else out += char(c);
    }
    return out + "\"";
}

void set_grammar(CompletionParams& p, std::shared_ptr<const grammar::Grammar> g, const std::string& param) {
    if (p.grammar)
        throw ApiError::invalid(fmt::format("give one of {}, not several", kGrammarFields), param, "invalid_value");
    p.grammar = std::move(g);
}

// The schema at `path` (keys) in the ordered body when there is one, else `plain` (sorted).
ojson ordered_schema(const json& plain, const ojson* ordered, std::initializer_list<const char*> path) {
    if (!ordered) return plain;
    const ojson* at = ordered;
    for (const char* key : path) {
        at = field(*at, key);
        if (!at) return plain;
    }
    return *at;
}

void parse_response_format(const json& format, CompletionParams& p, const ojson* ordered) {
    if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
        wrong_type("response_format", "an object with a string 'type'", format);
    const std::string type = format["type"].get<std::string>();
    if (type == "json_object") {
        p.grammar = grammar::json_object_grammar();
    } else if (type == "json_schema") {
        const json& spec = read_object(required(format, "json_schema", "response_format.json_schema"),
                                       "response_format.json_schema");
        if (const json* name = field(spec, "name")) read_string(*name, "response_format.json_schema.name");
        if (const json* strict = field(spec, "strict")) read_bool(*strict, "response_format.json_schema.strict");
        const json* schema = field(spec, "schema");
        const std::string param = "response_format.json_schema.schema";
        if (schema && !schema->is_object() && !schema->is_boolean()) wrong_type(param, "an object", *schema);
        // No schema: any JSON value. strict or not, the schema is always enforced.
        p.grammar = schema ? schema_grammar(ordered_schema(*schema, ordered, {"response_format", "json_schema", "schema"}), param)
                           : schema_grammar(ojson::object(), param);
    } else if (type != "text") {
        throw ApiError::invalid(fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', "
                                            "got '{}'",
                                            type),
                                "response_format.type", "invalid_value");
    }
}

// vLLM's guided_choice: the output is exactly one of the strings.
void parse_guided_choice(const json& v, CompletionParams& p) {
    read_array(v, "guided_choice", "an array of strings");
    if (v.empty()) bad_value("guided_choice", "must hold at least one string");
    std::string rule = "root ::= ";
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string& choice = read_string(v[i], fmt::format("guided_choice[{}]", i));
        if (choice.empty()) bad_value(fmt::format("guided_choice[{}]", i), "must not be empty");
        rule += (i ? " | " : "") + gbnf_literal(choice);
    }
    set_grammar(p, gbnf_grammar(rule, "guided_choice", "a usable list of choices"), "guided_choice");
}

// vLLM's guided_regex: the whole output matches the pattern.
void parse_guided_regex(const json& v, CompletionParams& p) {
    const std::string& pattern = read_string(v, "guided_regex");
    std::string rule;
    try {
        rule = "root ::= " + grammar::regex_to_gbnf_text(pattern);
    } catch (const Error& e) {
        throw ApiError::invalid(fmt::format("'guided_regex' cannot be enforced: {}", e.what()), "guided_regex",
                                "unsupported_parameter");
    }
    set_grammar(p, gbnf_grammar(rule, "guided_regex", "a usable pattern"), "guided_regex");
}

}  // namespace

void parse_structured_output(const json& body, CompletionParams& p, const ojson* ordered) {
    if (const json* format = field(body, "response_format")) parse_response_format(*format, p, ordered);
    // llama-server's `json_schema` (an object) and vLLM's `guided_json` (an object or its JSON text)
    // are the schema of response_format json_schema under other names.
    for (const char* name : {"json_schema", "guided_json"}) {
        const json* v = field(body, name);
        if (!v) continue;
        ojson schema = ordered_schema(*v, ordered, {name});
        if (v->is_string()) {
            schema = ojson::parse(v->get<std::string>(), nullptr, false);
            if (schema.is_discarded())
                throw ApiError::invalid(fmt::format("'{}' is a string but not JSON text of a schema", name), name,
                                        "invalid_value");
        }
        if (!schema.is_object() && !schema.is_boolean()) wrong_type(name, "a JSON schema object", *v);
        if (p.grammar) set_grammar(p, nullptr, name);
        p.grammar = schema_grammar(schema, name);
    }
    if (const json* v = field(body, "guided_choice")) parse_guided_choice(*v, p);
    if (const json* v = field(body, "guided_regex")) parse_guided_regex(*v, p);
    // vLLM's guided_grammar in the GBNF form (xgrammar's), the same as llama.cpp's `grammar`.
    for (const char* name : {"guided_grammar", "grammar"}) {
        const json* v = field(body, name);
        if (!v) continue;
        const std::string& text = read_string(*v, name);
        if (p.grammar) set_grammar(p, nullptr, name);
        p.grammar = gbnf_grammar(text, name, "a usable GBNF grammar");
        // A grammar that spells the reasoning tags (or harmony's channels) itself covers the whole
        // output, thinking included.
        p.grammar_spells_reasoning =
            text.find("think>") != std::string::npos || text.find("<|channel|>") != std::string::npos;
    }
}

}  // namespace pagoda::server::openai_fields
