#include "server/openai_request.h"

#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "boolean";
        case json::value_t::string: return "string";
        case json::value_t::array: return "array";
        case json::value_t::object: return "object";
        case json::value_t::number_float: return "number";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "integer";
        default: return "value";
    }
}

[[noreturn]] void wrong_type(const std::string& field, const char* wanted, const json& got) {
    throw ApiError::invalid(fmt::format("'{}' must be {}, got {}", field, wanted, type_name(got)), field,
                            "invalid_type");
}
[[noreturn]] void out_of_range(const std::string& field, const std::string& rule) {
    throw ApiError::invalid(fmt::format("'{}' {}", field, rule), field, "invalid_value");
}

// A field that is absent or null reads as "not given".
const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

bool get_bool(const json& v, const std::string& name) {
    if (!v.is_boolean()) wrong_type(name, "a boolean", v);
    return v.get<bool>();
}

double get_number(const json& v, const std::string& name, double lo, double hi) {
    if (!v.is_number()) wrong_type(name, "a number", v);
    double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) out_of_range(name, fmt::format("must be between {} and {}", lo, hi));
    return x;
}

// The rule an integer broke, in words: a bound nobody could mean (the type's or the 2^40 cap on
// token counts) is left out rather than printed as a huge number.
std::string integer_rule(int64_t lo, int64_t hi) {
    const bool no_lo = lo == std::numeric_limits<int64_t>::min();
    const bool no_hi = hi >= (int64_t(1) << 40);
    if (no_lo && no_hi) return "must fit in a signed 64-bit integer";
    if (no_hi) return fmt::format("must be at least {}", lo);
    if (no_lo) return fmt::format("must be at most {}", hi);
    return fmt::format("must be between {} and {}", lo, hi);
}

// Integers may arrive as 3 or 3.0 (JavaScript clients); 3.5 is refused.
int64_t get_integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
    int64_t x = 0;
    if (v.is_number_integer()) {
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            out_of_range(name, integer_rule(lo, hi));
        x = v.get<int64_t>();
    } else if (v.is_number_float()) {
        double d = v.get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) wrong_type(name, "an integer", v);
        x = int64_t(d);
    } else {
        wrong_type(name, "an integer", v);
    }
    if (x < lo || x > hi) out_of_range(name, integer_rule(lo, hi));
    return x;
}

std::vector<int32_t> token_array(const json& v, const std::string& name) {
    std::vector<int32_t> ids;
    ids.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        ids.push_back(int32_t(get_integer(v[i], fmt::format("{}[{}]", name, i), 0, std::numeric_limits<int32_t>::max())));
    return ids;
}

void parse_prompt(const json& body, CompletionParams& p) {
    const json* prompt = field(body, "prompt");
    if (!prompt) throw ApiError::invalid("'prompt' is required", "prompt", "missing_required_parameter");
    if (prompt->is_string()) {
        p.prompts.emplace_back(prompt->get<std::string>());
        return;
    }
    if (!prompt->is_array()) wrong_type("prompt", "a string, an array of strings or an array of token ids", *prompt);
    if (prompt->empty()) out_of_range("prompt", "must not be an empty array");
    if ((*prompt)[0].is_number()) {  // one prompt as token ids
        p.prompts.emplace_back(token_array(*prompt, "prompt"));
        return;
    }
    for (size_t i = 0; i < prompt->size(); ++i) {  // several prompts: strings or token arrays
        const json& item = (*prompt)[i];
        const std::string name = fmt::format("prompt[{}]", i);
        if (item.is_string()) p.prompts.emplace_back(item.get<std::string>());
        else if (item.is_array() && !item.empty()) p.prompts.emplace_back(token_array(item, name));
        else wrong_type(name, "a string or a non-empty array of token ids", item);
    }
}

void check_tool_messages(const json& m, const std::string& name);

void parse_messages(const json& body, CompletionParams& p) {
    const json* messages = field(body, "messages");
    if (!messages) throw ApiError::invalid("'messages' is required", "messages", "missing_required_parameter");
    if (!messages->is_array()) wrong_type("messages", "an array", *messages);
    if (messages->empty()) out_of_range("messages", "must contain at least one message");
    for (size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string name = fmt::format("messages[{}]", i);
        if (!m.is_object()) wrong_type(name, "an object", m);
        auto role = m.find("role");
        if (role == m.end() || !role->is_string())
            throw ApiError::invalid(fmt::format("'{}.role' must be a string", name), name + ".role", "invalid_type");
        const std::string r = role->get<std::string>();
        if (r == "function")
            throw ApiError::invalid(fmt::format("'{}.role' \"function\" (deprecated by OpenAI) is not supported; send "
                                                "tool results as role \"tool\" with tool_call_id",
                                                name),
                                    name + ".role", "unsupported_parameter");
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
            throw ApiError::invalid(fmt::format("'{}.role' must be \"system\", \"developer\", \"user\", "
                                                "\"assistant\" or \"tool\", got \"{}\"",
                                                name, r),
                                    name + ".role", "invalid_value");
        check_tool_messages(m, name);
        auto content = m.find("content");
        if (content != m.end() && !content->is_null() && !content->is_string()) {
            if (!content->is_array()) wrong_type(name + ".content", "a string, an array of parts or null", *content);
            for (size_t j = 0; j < content->size(); ++j) {
                const json& part = (*content)[j];
                const std::string pname = fmt::format("{}.content[{}]", name, j);
                if (!part.is_object()) wrong_type(pname, "an object", part);
                auto type = part.find("type");
                if (type == part.end() || !type->is_string() || *type != "text")
                    throw ApiError::invalid(fmt::format("'{}' has an unsupported type: only text parts are supported", pname),
                                            pname, "invalid_value");
                auto text = part.find("text");
                if (text == part.end() || !text->is_string()) wrong_type(pname + ".text", "a string", part.value("text", json()));
            }
        }
    }
    p.messages = *messages;
}

std::shared_ptr<const grammar::Grammar> schema_grammar(const json& schema, const std::string& param) {
    try {
        return grammar::GrammarCache::shared().get("schema:" + schema.dump(),
                                                   [&] { return grammar::compile_json_schema(schema); });
    } catch (const grammar::SchemaError& e) {
        throw ApiError::invalid(fmt::format("'{}' cannot be enforced: {}", param, e.what()), param,
                                "unsupported_parameter");
    }
}

// response_format (text, json_object, json_schema), json_schema / guided_json, or a GBNF `grammar`
// -> p.grammar.
void parse_structured_output(const json& body, CompletionParams& p) {
    const json* format = field(body, "response_format");
    const json* gbnf = field(body, "grammar");
    if (format) {
        if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
            wrong_type("response_format", "an object with a string 'type'", *format);
        const std::string type = (*format)["type"].get<std::string>();
        if (type == "json_object") {
            p.grammar = grammar::json_object_grammar();
        } else if (type == "json_schema") {
            const json* spec = field(*format, "json_schema");
            if (!spec) throw ApiError::invalid("'response_format.json_schema' is required for type 'json_schema'",
                                               "response_format.json_schema", "missing_required_parameter");
            if (!spec->is_object()) wrong_type("response_format.json_schema", "an object", *spec);
            if (const json* name = field(*spec, "name"); name && !name->is_string())
                wrong_type("response_format.json_schema.name", "a string", *name);
            if (const json* strict = field(*spec, "strict"); strict && !strict->is_boolean())
                wrong_type("response_format.json_schema.strict", "a boolean", *strict);
            const json* schema = field(*spec, "schema");
            const std::string param = "response_format.json_schema.schema";
            if (schema && !schema->is_object() && !schema->is_boolean()) wrong_type(param, "an object", *schema);
            // No schema: any JSON value. strict or not, the schema is always enforced.
            p.grammar = schema_grammar(schema ? *schema : json::object(), param);
        } else if (type != "text") {
            throw ApiError::invalid(fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', "
                                                "got '{}'",
                                                type),
                                    "response_format.type", "invalid_value");
        }
    }
    // llama-server's `json_schema` (an object) and vLLM's `guided_json` (an object or its JSON text)
    // are the schema of response_format json_schema under other names.
    for (const char* name : {"json_schema", "guided_json"}) {
        const json* v = field(body, name);
        if (!v) continue;
        json schema = *v;
        if (v->is_string()) {
            schema = json::parse(v->get<std::string>(), nullptr, false);
            if (schema.is_discarded())
                throw ApiError::invalid(fmt::format("'{}' is a string but not JSON text of a schema", name), name,
                                        "invalid_value");
        }
        if (!schema.is_object() && !schema.is_boolean()) wrong_type(name, "a JSON schema object", *v);
        if (p.grammar)
            throw ApiError::invalid(fmt::format("give one of 'response_format', 'json_schema' and 'guided_json', not "
                                                "several",
                                                name),
                                    name, "invalid_value");
        p.grammar = schema_grammar(schema, name);
    }
    if (gbnf) {
        if (!gbnf->is_string()) wrong_type("grammar", "a string (GBNF)", *gbnf);
        if (p.grammar)
            throw ApiError::invalid("give either 'grammar' or a JSON schema ('response_format', 'json_schema', "
                                    "'guided_json'), not both",
                                    "grammar",
                                    "invalid_value");
        try {
            const std::string text = gbnf->get<std::string>();
            p.grammar = grammar::GrammarCache::shared().get("gbnf:" + text, [&] { return grammar::parse_gbnf(text); });
            // A grammar that spells the reasoning tags itself covers the whole output, thinking included.
            p.grammar_spells_reasoning = text.find("think>") != std::string::npos;
        } catch (const Error& e) {
            throw ApiError::invalid(fmt::format("'grammar' is not a usable GBNF grammar: {}", e.what()), "grammar",
                                    "invalid_value");
        }
    }
}

bool valid_function_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    return true;
}

// tools, tool_choice, parallel_tool_calls (chat).
void parse_tools(const json& body, CompletionParams& p) {
    if (const json* v = field(body, "tools")) {
        if (!v->is_array()) wrong_type("tools", "an array", *v);
        for (size_t i = 0; i < v->size(); ++i) {
            const json& t = (*v)[i];
            const std::string name = fmt::format("tools[{}]", i);
            if (!t.is_object()) wrong_type(name, "an object", t);
            const json* type = field(t, "type");
            if (!type || !type->is_string() || *type != "function")
                throw ApiError::invalid(fmt::format("'{}.type' must be 'function' (the only tool type supported)", name),
                                        name + ".type", "unsupported_parameter");
            const json* fn = field(t, "function");
            if (!fn || !fn->is_object()) wrong_type(name + ".function", "an object", fn ? *fn : json());
            const json* fname = field(*fn, "name");
            if (!fname || !fname->is_string() || !valid_function_name(fname->get<std::string>()))
                throw ApiError::invalid(fmt::format("'{}.function.name' must be 1-64 characters of a-z, A-Z, 0-9, _ "
                                                    "and -",
                                                    name),
                                        name + ".function.name", "invalid_value");
            for (size_t j = 0; j < i; ++j)
                if ((*v)[j]["function"]["name"] == *fname)
                    throw ApiError::invalid(fmt::format("'{}.function.name' repeats the name of tools[{}]", name, j),
                                            name + ".function.name", "invalid_value");
            if (const json* params = field(*fn, "parameters"); params && !params->is_object())
                wrong_type(name + ".function.parameters", "an object (a JSON schema)", *params);
            if (const json* d = field(*fn, "description"); d && !d->is_string())
                wrong_type(name + ".function.description", "a string", *d);
            if (const json* st = field(*fn, "strict"); st && !st->is_boolean())
                wrong_type(name + ".function.strict", "a boolean", *st);
        }
        p.tools = *v;
    }
    const bool have_tools = p.tools.is_array() && !p.tools.empty();
    if (const json* v = field(body, "tool_choice")) {
        if (v->is_string()) {
            const std::string c = v->get<std::string>();
            if (c == "auto") p.tool_choice = ToolChoice::automatic;
            else if (c == "none") p.tool_choice = ToolChoice::none;
            else if (c == "required") p.tool_choice = ToolChoice::required;
            else
                throw ApiError::invalid(fmt::format("'tool_choice' must be 'auto', 'none', 'required' or a function, got "
                                                    "'{}'",
                                                    c),
                                        "tool_choice", "invalid_value");
        } else if (v->is_object()) {
            const json* type = field(*v, "type");
            const json* fn = field(*v, "function");
            const json* fname = fn && fn->is_object() ? field(*fn, "name") : nullptr;
            if (!type || *type != "function" || !fname || !fname->is_string())
                throw ApiError::invalid("'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                                        "{\"name\": ...}}",
                                        "tool_choice", "invalid_value");
            p.tool_choice = ToolChoice::function;
            p.tool_choice_function = fname->get<std::string>();
            bool found = false;
            if (have_tools)
                for (const auto& t : p.tools) found = found || t["function"]["name"] == *fname;
            if (!found)
                throw ApiError::invalid(fmt::format("'tool_choice' names function '{}', which is not in 'tools'",
                                                    p.tool_choice_function),
                                        "tool_choice", "invalid_value");
        } else {
            wrong_type("tool_choice", "a string or an object", *v);
        }
        if (p.tool_choice == ToolChoice::required && !have_tools)
            throw ApiError::invalid("'tool_choice' is 'required' but no 'tools' are given", "tool_choice", "invalid_value");
    }
    if (const json* v = field(body, "parallel_tool_calls")) p.parallel_tool_calls = get_bool(*v, "parallel_tool_calls");
}

// Assistant tool_calls and tool messages, which the template renders.
void check_tool_messages(const json& m, const std::string& name) {
    const std::string role = m["role"].get<std::string>();
    if (role == "tool") {
        auto id = m.find("tool_call_id");
        if (id == m.end() || !id->is_string())
            throw ApiError::invalid(fmt::format("'{}.tool_call_id' must be a string (the id of the call answered)", name),
                                    name + ".tool_call_id", "invalid_type");
    }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || calls->is_null()) return;
    if (role != "assistant")
        throw ApiError::invalid(fmt::format("'{}.tool_calls' is only for assistant messages", name), name + ".tool_calls",
                                "invalid_value");
    if (!calls->is_array()) wrong_type(name + ".tool_calls", "an array", *calls);
    for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string cname = fmt::format("{}.tool_calls[{}]", name, k);
        if (!c.is_object()) wrong_type(cname, "an object", c);
        const json* fn = field(c, "function");
        if (!fn || !fn->is_object()) wrong_type(cname + ".function", "an object", fn ? *fn : json());
        const json* fname = field(*fn, "name");
        if (!fname || !fname->is_string()) wrong_type(cname + ".function.name", "a string", fname ? *fname : json());
        const json* args = field(*fn, "arguments");
        if (args && !args->is_string()) wrong_type(cname + ".function.arguments", "a string (JSON text)", *args);
    }
}

// The no-ops of request_fields.h whose every value is a no-op only within limits: those values
// are checked here, the rest refused (store: true would ask for storage nobody provides).
void check_no_op_values(const json& body) {
    for (const char* name : {"user", "safety_identifier", "prompt_cache_key"})
        if (const json* v = field(body, name); v && !v->is_string()) wrong_type(name, "a string", *v);
    if (const json* v = field(body, "metadata"); v && !v->is_object()) wrong_type("metadata", "an object", *v);
    if (const json* v = field(body, "store"); v && get_bool(*v, "store"))
        throw ApiError::invalid("'store' true is not supported: this server stores no completions", "store",
                                "unsupported_parameter");
    if (const json* v = field(body, "service_tier")) {
        if (!v->is_string()) wrong_type("service_tier", "a string", *v);
        if (*v != "auto" && *v != "default")
            throw ApiError::invalid(fmt::format("'service_tier' '{}' is not offered: there is one tier ('auto' or "
                                                "'default')",
                                                v->get<std::string>()),
                                    "service_tier", "unsupported_parameter");
    }
    if (const json* v = field(body, "modalities")) {
        if (!v->is_array()) wrong_type("modalities", "an array", *v);
        for (size_t i = 0; i < v->size(); ++i)
            if ((*v)[i] != "text")
                throw ApiError::invalid("'modalities' may only hold \"text\": text is the only output", "modalities",
                                        "unsupported_parameter");
    }
    if (const json* v = field(body, "skip_special_tokens"); v && !get_bool(*v, "skip_special_tokens"))
        throw ApiError::invalid("'skip_special_tokens' false is not supported: control tokens are never written as "
                                "text",
                                "skip_special_tokens", "unsupported_parameter");
    if (const json* v = field(body, "cache_prompt")) get_bool(*v, "cache_prompt");
}

void parse_stop(const json& body, CompletionParams& p) {
    const json* stop = field(body, "stop");
    if (!stop) return;
    if (stop->is_string()) {
        p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
        if (stop->size() > kMaxStopStrings) out_of_range("stop", fmt::format("may hold at most {} strings", kMaxStopStrings));
        for (size_t i = 0; i < stop->size(); ++i) {
            if (!(*stop)[i].is_string()) wrong_type(fmt::format("stop[{}]", i), "a string", (*stop)[i]);
            p.stop.push_back((*stop)[i].get<std::string>());
        }
    } else {
        wrong_type("stop", "a string or an array of strings", *stop);
    }
    for (const auto& s : p.stop)
        if (s.empty()) out_of_range("stop", "must not contain empty strings");
}

// thinking_token_budget (vLLM) or its alias max_thinking_tokens, and reasoning_effort; what they
// need of the model is checked later (server/reasoning_request.h).
void parse_thinking_budget(const json& body, CompletionParams& p) {
    for (const char* name : {"thinking_token_budget", "max_thinking_tokens"})
        if (const json* v = field(body, name)) {
            if (p.thinking_budget)
                throw ApiError::invalid("send one of 'thinking_token_budget' and 'max_thinking_tokens'", name,
                                        "invalid_value");
            p.thinking_budget = get_integer(*v, name, 0, int64_t(1) << 30);
            p.thinking_budget_param = name;
        }
    if (const json* v = field(body, "reasoning_effort")) {
        if (!v->is_string()) wrong_type("reasoning_effort", "a string", *v);
        const std::string e = v->get<std::string>();
        if (e != "low" && e != "medium" && e != "high")
            throw ApiError::invalid(fmt::format("'reasoning_effort' must be \"low\", \"medium\" or \"high\", got \"{}\"", e),
                                    "reasoning_effort", "invalid_value");
        p.reasoning_effort = e;
    }
}

}  // namespace

std::string json_problem(std::string_view message) {
    // nlohmann writes "[json.exception.parse_error.101] parse error at line 1, column 5: syntax
    // error ..."; the bracketed tag and the repeated "parse error" are the library's, not the user's.
    if (message.starts_with("[json.exception.")) {
        const size_t end = message.find("] ");
        if (end != std::string_view::npos) message.remove_prefix(end + 2);
    }
    if (message.starts_with("parse error ")) message.remove_prefix(12);
    return std::string(message);
}

const char* endpoint_name(Endpoint e) {
    switch (e) {
        case Endpoint::completions: return "completions";
        case Endpoint::chat_completions: return "chat.completions";
        case Endpoint::embeddings: return "embeddings";
        case Endpoint::responses: return "responses";
        case Endpoint::infill: return "infill";
    }
    return "?";
}

json parse_json_body(std::string_view bytes) {
    if (bytes.empty()) throw ApiError::invalid("the request body is empty; send a JSON object", {}, "invalid_json");
    try {
        return json::parse(bytes.begin(), bytes.end());
    } catch (const json::parse_error& e) {
        throw ApiError::invalid(fmt::format("the request body is not valid JSON: {}", json_problem(e.what())), {},
                                "invalid_json");
    } catch (const json::exception& e) {
        // Syntactically JSON but not representable, e.g. 1e400 (a number beyond a double's range).
        throw ApiError::invalid(fmt::format("the request body holds a value out of range: {}", json_problem(e.what())),
                                {}, "invalid_json");
    }
}

CompletionParams parse_completion_request(const json& body, Endpoint endpoint) {
    if (endpoint == Endpoint::infill) return parse_infill_request(body);
    if (!body.is_object()) wrong_type("body", "a JSON object", body);
    check_request_fields(body, endpoint);
    CompletionParams p;
    p.endpoint = endpoint;
    const bool chat = endpoint == Endpoint::chat_completions;
    check_no_op_values(body);

    if (const json* v = field(body, "model")) {
        if (!v->is_string()) wrong_type("model", "a string", *v);
        p.model = v->get<std::string>();
    }
    if (chat) parse_messages(body, p);
    else parse_prompt(body, p);

    if (const json* v = field(body, "n")) p.n = int32_t(get_integer(*v, "n", 1, kMaxChoices));
    if (const json* v = field(body, "best_of")) {
        if (get_integer(*v, "best_of", 1, kMaxChoices) != p.n)
            throw ApiError::invalid("'best_of' different from 'n' is not supported", "best_of", "unsupported_parameter");
    }
    // max_completion_tokens is the newer name (chat); it wins over max_tokens.
    if (const json* v = field(body, "max_tokens")) p.max_tokens = get_integer(*v, "max_tokens", 1, int64_t(1) << 40);
    if (const json* v = field(body, "max_completion_tokens")) {
        p.max_tokens = get_integer(*v, "max_completion_tokens", 1, int64_t(1) << 40);
        p.max_tokens_param = "max_completion_tokens";
    }
    parse_stop(body, p);
    parse_thinking_budget(body, p);
    if (const json* v = field(body, "min_tokens")) {
        p.min_tokens = get_integer(*v, "min_tokens", 0, int64_t(1) << 40);
        if (p.max_tokens && p.min_tokens > *p.max_tokens)
            throw ApiError::invalid(fmt::format("'min_tokens' ({}) must not exceed '{}' ({})", p.min_tokens,
                                                p.max_tokens_param, *p.max_tokens),
                                    "min_tokens", "invalid_value");
    }
    if (const json* v = field(body, "stop_token_ids")) {
        if (!v->is_array()) wrong_type("stop_token_ids", "an array of token ids", *v);
        p.stop_token_ids = token_array(*v, "stop_token_ids");
    }
    if (const json* v = field(body, "temperature")) p.temperature = float(get_number(*v, "temperature", 0, 2));
    if (const json* v = field(body, "top_p")) {
        p.top_p = float(get_number(*v, "top_p", 0, 1));
        if (p.top_p <= 0) out_of_range("top_p", "must be greater than 0 and at most 1");
    }
    if (const json* v = field(body, "top_k")) {
        int64_t k = get_integer(*v, "top_k", -1, std::numeric_limits<int32_t>::max());
        p.top_k = k < 0 ? 0 : int32_t(k);  // vLLM: -1 means off
    }
    if (const json* v = field(body, "min_p")) p.min_p = float(get_number(*v, "min_p", 0, 1));
    if (const json* v = field(body, "repetition_penalty")) {
        p.repetition_penalty = float(get_number(*v, "repetition_penalty", 0, 10));
        if (p.repetition_penalty <= 0) out_of_range("repetition_penalty", "must be greater than 0");
    }
    if (const json* v = field(body, "presence_penalty")) p.presence_penalty = float(get_number(*v, "presence_penalty", -2, 2));
    if (const json* v = field(body, "frequency_penalty"))
        p.frequency_penalty = float(get_number(*v, "frequency_penalty", -2, 2));
    if (const json* v = field(body, "logit_bias")) {
        if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to numbers", *v);
        for (auto it = v->begin(); it != v->end(); ++it) {
            const std::string name = "logit_bias." + it.key();
            int64_t id = -1;
            try {
                size_t used = 0;
                id = std::stoll(it.key(), &used);
                if (used != it.key().size()) id = -1;
            } catch (const std::exception&) {
                id = -1;
            }
            if (id < 0 || id > std::numeric_limits<int32_t>::max())
                throw ApiError::invalid(fmt::format("'logit_bias' keys must be token ids, got '{}'", it.key()), "logit_bias",
                                        "invalid_value");
            p.logit_bias[int32_t(id)] = float(get_number(it.value(), name, -100, 100));
        }
    }
    if (const json* v = field(body, "seed")) {
        int64_t s = get_integer(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
        p.seed = uint64_t(s);
    }
    if (chat) {
        bool want = false;
        if (const json* v = field(body, "logprobs")) want = get_bool(*v, "logprobs");
        int32_t top = 0;
        if (const json* v = field(body, "top_logprobs")) {
            top = int32_t(get_integer(*v, "top_logprobs", 0, 20));
            if (!want) throw ApiError::invalid("'top_logprobs' needs 'logprobs' set to true", "top_logprobs", "invalid_value");
        }
        if (want) p.logprobs = top;
        parse_tools(body, p);
        if (const json* v = field(body, "chat_template_kwargs")) {
            if (!v->is_object()) wrong_type("chat_template_kwargs", "an object", *v);
            // The variables the server itself sets are not the client's to replace.
            for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
                if (v->contains(reserved))
                    throw ApiError::invalid(fmt::format("'chat_template_kwargs.{}' is set by the server and cannot be "
                                                        "overridden",
                                                        reserved),
                                            fmt::format("chat_template_kwargs.{}", reserved), "invalid_value");
            p.chat_template_kwargs = *v;
        }
    } else {
        if (const json* v = field(body, "logprobs")) p.logprobs = int32_t(get_integer(*v, "logprobs", 0, 20));
        if (const json* v = field(body, "echo")) p.echo = get_bool(*v, "echo");
        if (p.echo && p.logprobs >= 0)
            throw ApiError::invalid("'echo' together with 'logprobs' is not supported", "echo", "unsupported_parameter");
        if (const json* v = field(body, "suffix")) {
            if (!v->is_string()) wrong_type("suffix", "a string", *v);
            // Fill in the middle: each prompt is the text before the hole (empty: plain completion).
            if (!v->get<std::string>().empty()) {
                if (p.echo)
                    throw ApiError::invalid("'echo' together with a non-empty 'suffix' is not supported", "echo",
                                            "unsupported_parameter");
                p.fim = FimRequest{.suffix = v->get<std::string>()};
            }
        }
    }
    parse_structured_output(body, p);
    if (p.grammar && (p.tool_choice == ToolChoice::required || p.tool_choice == ToolChoice::function))
        throw ApiError::invalid("'tool_choice' that forces a call constrains the output itself: not together with "
                                "'response_format' or 'grammar'",
                                "tool_choice", "invalid_value");
    if (const json* v = field(body, "ignore_eos")) p.ignore_eos = get_bool(*v, "ignore_eos");
    if (const json* v = field(body, "stream")) p.stream = get_bool(*v, "stream");
    if (const json* v = field(body, "stream_options")) {
        if (!v->is_object()) wrong_type("stream_options", "an object", *v);
        for (auto it = v->begin(); it != v->end(); ++it) {
            const std::string name = "stream_options." + it.key();
            if (it->is_null()) continue;
            if (it.key() == "include_usage") {
                p.include_usage = get_bool(*it, name);
            } else if (it.key() == "include_obfuscation") {
                // OpenAI pads stream chunks against length side channels; pagoda sends no padding.
                if (get_bool(*it, name))
                    throw ApiError::invalid("'stream_options.include_obfuscation' true is not supported: chunks carry "
                                            "no padding",
                                            name, "unsupported_parameter");
            } else {
                throw ApiError::invalid(fmt::format("'{}' is not a stream option here (include_usage, "
                                                    "include_obfuscation)",
                                                    name),
                                        name, "unsupported_parameter");
            }
        }
    }
    if (int64_t(p.prompts.size()) * p.n > kMaxChoices)
        out_of_range("n", fmt::format("times the number of prompts must be at most {}", kMaxChoices));
    return p;
}

}  // namespace pagoda::server
