#include "server/responses_request.h"

#include <cmath>
#include <fmt/format.h>

#include "core/json_reader.h"
#include "server/image_parts.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;
using namespace json_reader;

[[noreturn]] void unsupported(const std::string& name, const std::string& why) {
    throw ApiError::invalid(fmt::format("'{}' {}", name, why), name, "unsupported_parameter");
}
[[noreturn]] void invalid_value(const std::string& name, const std::string& why) {
    throw ApiError::invalid(fmt::format("'{}' {}", name, why), name, "invalid_value");
}

std::string get_string(const json& object, const char* key, const std::string& prefix, bool required) {
    const json* v = field(object, key);
    const std::string name = prefix + "." + key;
    if (!v) {
        if (required) throw ApiError::invalid(fmt::format("'{}' is required", name), name, "missing_required_parameter");
        return {};
    }
    if (!v->is_string()) wrong_type(name, "a string", *v);
    return v->get<std::string>();
}

// Keys an object may carry: anything else is refused by name (never accepted and ignored).
void only_keys(const json& object, const std::string& prefix, std::initializer_list<std::string_view> known) {
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (it->is_null()) continue;
        bool ok = false;
        for (auto k : known) ok = ok || k == it.key();
        if (!ok) unsupported(prefix + "." + it.key(), "is not supported here; it is refused rather than ignored");
    }
}

bool is_hosted_tool(const std::string& type) {
    for (const char* t : {"web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
                          "file_search", "code_interpreter", "computer_use", "computer_use_preview", "image_generation",
                          "mcp", "local_shell", "shell", "apply_patch"})
        if (type == t) return true;
    return false;
}

// Text parts of a message: input_text, output_text (assistant output echoed back) and refusal.
void check_content(const json& content, const std::string& name, bool images) {
    if (content.is_string()) return;
    if (!content.is_array()) wrong_type(name, "a string or an array of content parts", content);
    for (size_t j = 0; j < content.size(); ++j) {
        const json& part = content[j];
        const std::string pname = fmt::format("{}[{}]", name, j);
        if (!part.is_object()) wrong_type(pname, "an object", part);
        const std::string type = get_string(part, "type", pname, true);
        if (type == "input_text" || type == "output_text") {
            get_string(part, "text", pname, true);
            only_keys(part, pname, {"type", "text", "annotations", "logprobs"});
        } else if (type == "refusal") {
            get_string(part, "refusal", pname, true);
            only_keys(part, pname, {"type", "refusal"});
        } else if (type == "input_image" && images) {
            only_keys(part, pname, {"type", "image_url", "detail"});  // file_id: no file store here
            json chat_part = image_url_part(get_string(part, "image_url", pname, true));
            if (const json* detail = field(part, "detail")) chat_part["image_url"]["detail"] = *detail;
            check_image_part(chat_part, pname);  // a data: URL, detail "auto"
        } else {
            unsupported(pname + ".type", fmt::format("'{}' is not supported: only text parts (input_text, output_text) "
                                                     "and, in user, system and developer messages, input_image are; "
                                                     "this server has no file or audio input",
                                                     type));
        }
    }
}

void check_item(const json& item, const std::string& name) {
    if (!item.is_object()) wrong_type(name, "an object", item);
    std::string type = "message";  // EasyInputMessage: {role, content} without a type
    if (const json* t = field(item, "type")) {
        if (!t->is_string()) wrong_type(name + ".type", "a string", *t);
        type = t->get<std::string>();
    }
    if (type == "message") {
        const std::string role = get_string(item, "role", name, true);
        if (role != "user" && role != "system" && role != "developer" && role != "assistant")
            invalid_value(name + ".role", fmt::format("must be \"user\", \"system\", \"developer\" or \"assistant\", got "
                                                      "\"{}\"",
                                                      role));
        const json* content = field(item, "content");
        if (!content)
            throw ApiError::invalid(fmt::format("'{}.content' is required", name), name + ".content",
                                    "missing_required_parameter");
        check_content(*content, name + ".content", role != "assistant");
        only_keys(item, name, {"type", "role", "content", "id", "status"});
    } else if (type == "function_call") {
        get_string(item, "call_id", name, true);
        get_string(item, "name", name, true);
        get_string(item, "arguments", name, true);
        only_keys(item, name, {"type", "call_id", "name", "arguments", "id", "status"});
    } else if (type == "function_call_output") {
        get_string(item, "call_id", name, true);
        const json* output = field(item, "output");
        if (!output)
            throw ApiError::invalid(fmt::format("'{}.output' is required", name), name + ".output",
                                    "missing_required_parameter");
        check_content(*output, name + ".output", false);
        only_keys(item, name, {"type", "call_id", "output", "id", "status"});
    } else if (type == "reasoning") {
        if (field(item, "encrypted_content"))
            unsupported(name + ".encrypted_content", "cannot be read: this server neither makes nor reads encrypted "
                                                     "reasoning");
        for (const char* key : {"summary", "content"}) {
            const json* parts = field(item, key);
            if (!parts) continue;
            const std::string pname = name + "." + key;
            if (!parts->is_array()) wrong_type(pname, "an array", *parts);
            for (size_t j = 0; j < parts->size(); ++j) {
                const std::string jname = fmt::format("{}[{}]", pname, j);
                if (!(*parts)[j].is_object()) wrong_type(jname, "an object", (*parts)[j]);
                get_string((*parts)[j], "text", jname, true);
            }
        }
        only_keys(item, name, {"type", "id", "summary", "content", "encrypted_content", "status"});
    } else if (type == "item_reference") {
        unsupported(name, "(item_reference) is not supported: send the item itself, or continue with "
                          "previous_response_id");
    } else {
        unsupported(name + ".type", fmt::format("'{}' is not an input item this server takes (message, function_call, "
                                                "function_call_output, reasoning)",
                                                type));
    }
}

void parse_input(const json& body, ResponsesRequest& r) {
    const json* input = field(body, "input");
    if (!input) {
        if (r.previous_response_id.empty())
            throw ApiError::invalid("'input' is required", "input", "missing_required_parameter");
        return;
    }
    if (input->is_string()) {
        r.input_items.push_back({{"type", "message"}, {"role", "user"}, {"content", *input}});
        return;
    }
    if (!input->is_array()) wrong_type("input", "a string or an array of items", *input);
    for (size_t i = 0; i < input->size(); ++i) check_item((*input)[i], fmt::format("input[{}]", i));
    r.input_items = *input;
}

void parse_tools(const json& body, ResponsesRequest& r) {
    if (const json* tools = field(body, "tools")) {
        if (!tools->is_array()) wrong_type("tools", "an array", *tools);
        for (size_t i = 0; i < tools->size(); ++i) {
            const json& t = (*tools)[i];
            const std::string name = fmt::format("tools[{}]", i);
            if (!t.is_object()) wrong_type(name, "an object", t);
            const std::string type = get_string(t, "type", name, true);
            if (is_hosted_tool(type))
                unsupported(name + ".type", fmt::format("'{}' is a hosted tool, which this server does not run; only "
                                                        "'function' tools are supported",
                                                        type));
            if (type != "function")
                unsupported(name + ".type", fmt::format("'{}' is not supported; only 'function' tools are", type));
            get_string(t, "name", name, true);  // checked further by the chat pipeline
            only_keys(t, name, {"type", "name", "description", "parameters", "strict"});
        }
        r.tools = *tools;
    }
    if (const json* c = field(body, "tool_choice")) {
        if (c->is_string()) {
            if (*c != "auto" && *c != "none" && *c != "required")
                invalid_value("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                                             "\"name\": ...}");
        } else if (c->is_object()) {
            const std::string type = get_string(*c, "type", "tool_choice", true);
            if (type != "function")
                unsupported("tool_choice.type", fmt::format("'{}' is not supported; only a function may be chosen "
                                                            "(\"auto\", \"none\", \"required\" or {{\"type\": "
                                                            "\"function\", \"name\": ...}})",
                                                            type));
            get_string(*c, "name", "tool_choice", true);
            only_keys(*c, "tool_choice", {"type", "name"});
        } else {
            wrong_type("tool_choice", "a string or an object", *c);
        }
        r.tool_choice = *c;
    }
    if (const json* v = field(body, "parallel_tool_calls")) {
        if (!v->is_boolean()) wrong_type("parallel_tool_calls", "a boolean", *v);
        r.parallel_tool_calls = v->get<bool>();
    }
}

void parse_text(const json& body, ResponsesRequest& r) {
    const json* text = field(body, "text");
    if (!text) return;
    if (!text->is_object()) wrong_type("text", "an object", *text);
    if (field(*text, "verbosity"))
        unsupported("text.verbosity", "is not supported: the length of the answer is not adjustable for these models");
    only_keys(*text, "text", {"format", "verbosity"});
    const json* format = field(*text, "format");
    if (!format) return;
    if (!format->is_object()) wrong_type("text.format", "an object", *format);
    const std::string type = get_string(*format, "type", "text.format", true);
    if (type == "text" || type == "json_object") {
        only_keys(*format, "text.format", {"type"});
    } else if (type == "json_schema") {
        get_string(*format, "name", "text.format", false);
        get_string(*format, "description", "text.format", false);
        only_keys(*format, "text.format", {"type", "name", "schema", "strict", "description"});
    } else {
        invalid_value("text.format.type", fmt::format("must be 'text', 'json_object' or 'json_schema', got '{}'", type));
    }
    r.text_format = *format;
}

void parse_reasoning(const json& body, ResponsesRequest& r) {
    const json* reasoning = field(body, "reasoning");
    if (!reasoning) return;
    if (!reasoning->is_object()) wrong_type("reasoning", "an object", *reasoning);
    if (const json* e = field(*reasoning, "effort"); e && !e->is_null()) {
        if (!e->is_string()) wrong_type("reasoning.effort", "a string", *e);
        const std::string effort = e->get<std::string>();
        if (effort != "low" && effort != "medium" && effort != "high")
            invalid_value("reasoning.effort", fmt::format("must be 'low', 'medium' or 'high', got '{}'", effort));
        r.reasoning_effort = effort;
    }
    if (field(*reasoning, "generate_summary"))
        unsupported("reasoning.generate_summary", "is not supported; send 'reasoning.summary'");
    only_keys(*reasoning, "reasoning", {"effort", "summary", "generate_summary"});
    if (const json* s = field(*reasoning, "summary")) {
        if (!s->is_string()) wrong_type("reasoning.summary", "a string", *s);
        if (*s == "concise")
            unsupported("reasoning.summary", "'concise' is not supported: the summary is the model's thinking itself, "
                                             "which this server does not shorten ('auto' or 'detailed')");
        if (*s != "auto" && *s != "detailed")
            invalid_value("reasoning.summary", "must be 'auto' or 'detailed'");
        r.reasoning_summary = s->get<std::string>();
    }
}

// The no-ops, whose values are checked all the same (a value that would ask for something is refused).
void check_no_ops(const json& body) {
    for (const char* name : {"user", "safety_identifier", "prompt_cache_key"})
        if (const json* v = field(body, name); v && !v->is_string()) wrong_type(name, "a string", *v);
    if (const json* v = field(body, "service_tier")) {
        if (!v->is_string()) wrong_type("service_tier", "a string", *v);
        if (*v != "auto" && *v != "default")
            unsupported("service_tier", "is not offered: there is one tier ('auto' or 'default')");
    }
    if (const json* v = field(body, "truncation")) {
        if (!v->is_string()) wrong_type("truncation", "a string", *v);
        if (*v != "disabled")
            unsupported("truncation", "'auto' is not supported: input is never truncated; too long an input is a 400");
    }
    if (const json* v = field(body, "background")) {
        if (!v->is_boolean()) wrong_type("background", "a boolean", *v);
        if (v->get<bool>()) unsupported("background", "true is not supported: responses are generated while the client waits");
    }
    if (const json* v = field(body, "include")) {
        if (!v->is_array()) wrong_type("include", "an array", *v);
        if (!v->empty())
            unsupported("include", fmt::format("'{}' is not supported: no extra output data is available",
                                               (*v)[0].is_string() ? (*v)[0].get<std::string>() : (*v)[0].dump()));
    }
    if (const json* v = field(body, "stream_options")) {
        if (!v->is_object()) wrong_type("stream_options", "an object", *v);
        only_keys(*v, "stream_options", {"include_obfuscation"});
        if (const json* o = field(*v, "include_obfuscation")) {
            if (!o->is_boolean()) wrong_type("stream_options.include_obfuscation", "a boolean", *o);
            if (o->get<bool>())
                unsupported("stream_options.include_obfuscation", "true is not supported: events carry no padding");
        }
    }
}

void check_fields(const json& body) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it->is_null()) continue;
        const ResponsesField* known = nullptr;
        for (const auto& f : responses_fields())
            if (f.name == it.key()) known = &f;
        if (!known)
            throw ApiError::invalid(fmt::format("'{}' is not a parameter of /v1/responses here; it is refused rather "
                                                "than ignored (docs/api.md lists the fields)",
                                                it.key()),
                                    it.key(), "unsupported_parameter");
        if (known->use == FieldUse::refused)
            throw ApiError::invalid(fmt::format("'{}' is not supported: {}", it.key(), known->why), it.key(),
                                    "unsupported_parameter");
    }
}

}  // namespace

const std::vector<ResponsesField>& responses_fields() {
    using enum FieldUse;
    static const std::vector<ResponsesField> fields = {
        {"model", honoured, "the served model's id or one of its LoRA adapters' (see LoRA adapters)"},
        {"input", honoured, "a string, or items: message, function_call, function_call_output, reasoning"},
        {"instructions", honoured, "a system message before the input"},
        {"tools", honoured, "type function only; hosted tools are a 400 naming them"},
        {"tool_choice", honoured, "auto, none, required or a named function"},
        {"parallel_tool_calls", honoured, ""},
        {"text", honoured, "format: text, json_object or json_schema; verbosity refused"},
        {"reasoning", honoured, "summary auto or detailed (the thinking itself); effort low, medium or high: a thinking budget (reasoning_effort)"},
        {"max_output_tokens", honoured, ""},
        {"temperature", honoured, ""},
        {"top_p", honoured, ""},
        {"stream", honoured, ""},
        {"store", honoured, "default true: kept in memory for previous_response_id and GET (bounded; lost on restart)"},
        {"previous_response_id", honoured, "continues a stored response's conversation"},
        {"metadata", honoured, "returned with the response and stored with it"},
        {"user", no_op, "an end-user id for the provider's abuse monitoring; no output depends on it"},
        {"safety_identifier", no_op, "the newer name of user"},
        {"prompt_cache_key", no_op, "prefix caching is automatic and keyed by content"},
        {"service_tier", no_op, "only \"auto\" or \"default\": there is one tier"},
        {"truncation", no_op, "only \"disabled\": input is never truncated"},
        {"background", no_op, "only false"},
        {"include", no_op, "only empty: no extra output data is available"},
        {"stream_options", no_op, "include_obfuscation only false"},
        {"conversation", refused, "the Conversations API is not available; continue with previous_response_id"},
        {"prompt", refused, "stored prompt templates are not available"},
        {"max_tool_calls", refused, "not enforced; limit the calls with tool_choice and parallel_tool_calls"},
        {"top_logprobs", refused, "logprobs are not available in the Responses API here (use /v1/chat/completions)"},
    };
    return fields;
}

static ResponsesRequest read_responses_request(const json& body) {
    if (!body.is_object()) wrong_type("body", "a JSON object", body);
    check_fields(body);
    check_no_ops(body);
    ResponsesRequest r;
    if (const json* v = field(body, "model")) {
        if (!v->is_string()) wrong_type("model", "a string", *v);
        r.model = v->get<std::string>();
    }
    if (const json* v = field(body, "previous_response_id")) {
        if (!v->is_string() || v->get<std::string>().empty()) wrong_type("previous_response_id", "a response id", *v);
        r.previous_response_id = v->get<std::string>();
    }
    parse_input(body, r);
    if (const json* v = field(body, "instructions")) {
        if (!v->is_string()) wrong_type("instructions", "a string", *v);
        r.instructions = v->get<std::string>();
    }
    parse_tools(body, r);
    parse_text(body, r);
    parse_reasoning(body, r);
    if (const json* v = field(body, "max_output_tokens"))
        r.max_output_tokens = read_integer(*v, "max_output_tokens", 1, int64_t(1) << 40);
    if (const json* v = field(body, "temperature")) r.temperature = read_number(*v, "temperature", 0, 2);
    if (const json* v = field(body, "top_p")) r.top_p = read_number(*v, "top_p", 0, 1);
    if (const json* v = field(body, "stream")) r.stream = read_bool(*v, "stream");
    if (const json* v = field(body, "store")) {
        if (!v->is_boolean()) wrong_type("store", "a boolean", *v);
        r.store = v->get<bool>();
    }
    if (const json* v = field(body, "metadata")) {
        if (!v->is_object()) wrong_type("metadata", "an object of strings", *v);
        if (v->size() > 16) invalid_value("metadata", "may hold at most 16 keys");
        for (auto it = v->begin(); it != v->end(); ++it) {
            if (it.key().size() > 64) invalid_value("metadata", "keys may be at most 64 characters");
            if (!it->is_string() || it->get<std::string>().size() > 512)
                invalid_value("metadata." + it.key(), "must be a string of at most 512 characters");
        }
        r.metadata = *v;
    }
    if (const json* v = field(body, "user")) r.user = v->get<std::string>();
    return r;
}

ResponsesRequest parse_responses_request(const json& body, const nlohmann::ordered_json* ordered) {
    try {
        ResponsesRequest r = read_responses_request(body);
        if (ordered) {  // checked above on the plain form; the same values with their keys as sent
            if (const auto* tools = field(*ordered, "tools")) r.tools = *tools;
            if (const auto* text = field(*ordered, "text"))
                if (const auto* format = field(*text, "format")) r.text_format = *format;
        }
        return r;
    } catch (const JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

}  // namespace pagoda::server
