#include "server/anthropic_request.h"

#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <regex>

#include "core/json_reader.h"
#include "server/api_error.h"
#include "server/image_parts.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;
using namespace json_reader;

[[noreturn]] void invalid(const std::string& param, const std::string& message, const char* code = "invalid_value") {
    throw ApiError::invalid(fmt::format("'{}' {}", param, message), param, code);
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
    throw ApiError::invalid(fmt::format("'{}' is not supported: {}", param, why), param, "unsupported_parameter");
}

const std::string& get_string(const json& object, const char* name, const std::string& path) {
    const json* v = field(object, name);
    if (!v || !v->is_string()) wrong_type(path + "." + name, "a string", v ? *v : json());
    return v->get_ref<const std::string&>();
}

// An object may carry only `allowed` keys (null values count as absent): a key this server does
// not act on is refused by name rather than dropped.
void only_keys(const json& object, const std::string& path, std::initializer_list<const char*> allowed) {
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (it->is_null()) continue;
        bool known = false;
        for (const char* a : allowed) known = known || it.key() == a;
        if (!known)
            unsupported(path + "." + it.key(), "this server does not act on it, so it is refused rather than ignored");
    }
}

// cache_control marks a prompt-cache breakpoint; the prefix cache here is automatic, so any
// well-formed marker is accepted and changes nothing.
void check_cache_control(const json& object, const std::string& path) {
    const json* c = field(object, "cache_control");
    if (!c) return;
    if (!c->is_object() || field(*c, "type") == nullptr || (*c)["type"] != "ephemeral")
        invalid(path + ".cache_control", "must be {\"type\": \"ephemeral\"} (optionally with ttl)");
    only_keys(*c, path + ".cache_control", {"type", "ttl"});
}

// A text block -> an OpenAI text part.
json text_part(const json& block, const std::string& path) {
    only_keys(block, path, {"type", "text", "cache_control"});
    check_cache_control(block, path);
    return json{{"type", "text"}, {"text", get_string(block, "text", path)}};
}

// An image block {"type": "image", "source": {"type": "base64", "media_type", "data"}} -> an
// OpenAI image_url part with the data: URL (the gateway decodes it; image_parts.h); a source
// {"type": "url", "url"} -> a part with that URL.
json image_part(const json& block, const std::string& path) {
    only_keys(block, path, {"type", "source", "cache_control"});
    check_cache_control(block, path);
    const json* source = field(block, "source");
    if (!source || !source->is_object()) wrong_type(path + ".source", "an object", source ? *source : json());
    const std::string& type = get_string(*source, "type", path + ".source");
    if (type == "url") {  // fetched only under --allow-image-urls (the gateway checks)
        only_keys(*source, path + ".source", {"type", "url"});
        json part = image_url_part(get_string(*source, "url", path + ".source"));
        check_image_part(part, path);  // a well-formed http(s) URL
        return part;
    }
    if (type != "base64") unsupported(path + ".source.type", fmt::format("'{}' image sources are not served (only base64)", type));
    only_keys(*source, path + ".source", {"type", "media_type", "data"});
    const std::string& media = get_string(*source, "media_type", path + ".source");
    const std::string& data = get_string(*source, "data", path + ".source");
    return image_url_part("data:" + media + ";base64," + data);
}

// Text content (a string, or an array of text blocks) -> OpenAI content (a string or text parts).
json text_content(const json& v, const std::string& path) {
    if (v.is_string()) return v;
    if (!v.is_array()) wrong_type(path, "a string or an array of text blocks", v);
    json parts = json::array();
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string bpath = fmt::format("{}[{}]", path, i);
        if (!v[i].is_object()) wrong_type(bpath, "an object", v[i]);
        const json* type = field(v[i], "type");
        if (!type || *type != "text")
            unsupported(bpath + ".type", "only text blocks are served here (no images, documents or search results)");
        parts.push_back(text_part(v[i], bpath));
    }
    return parts;
}

const char* kBlockTypes = "text, image, tool_use, tool_result and thinking";

struct Translation {
    json messages = json::array();
    std::vector<std::string> origin;  // per chat message: the Anthropic path it came from
    bool prefill = false;             // the last message is the assistant's, to be continued
};

// A prefill's text (the final assistant message's, or its last block's) is continued by the model:
// it must have some, and must not end in white space, which would tokenize differently continued.
void check_prefill_end(const std::string& text, const std::string& path) {
    if (text.empty()) invalid(path, "a final assistant message (a prefill) needs text to continue");
    if (std::isspace(static_cast<unsigned char>(text.back())))
        invalid(path, "the final assistant content cannot end with whitespace (the model would continue after it, "
                      "which tokenizes differently)");
}

void translate_message(const json& m, size_t i, bool last, Translation& out) {
    const std::string path = fmt::format("messages[{}]", i);
    if (!m.is_object()) wrong_type(path, "an object", m);
    only_keys(m, path, {"role", "content"});
    const std::string& role = get_string(m, "role", path);
    if (role != "user" && role != "assistant")
        invalid(path + ".role", fmt::format("must be \"user\" or \"assistant\", got \"{}\" (the system prompt is the "
                                            "top-level 'system')",
                                            role));
    const json* content = field(m, "content");
    if (!content) wrong_type(path + ".content", "a string or an array of content blocks", json());
    const std::string cpath = path + ".content";
    if (content->is_string()) {
        if (last && role == "assistant") {
            check_prefill_end(content->get_ref<const std::string&>(), cpath);
            out.prefill = true;
        }
        out.messages.push_back({{"role", role}, {"content", *content}});
        out.origin.push_back(path);
        return;
    }
    if (!content->is_array()) wrong_type(cpath, "a string or an array of content blocks", *content);
    if (content->empty()) invalid(cpath, "must hold at least one block");

    json text = json::array(), calls = json::array();
    std::string reasoning;
    for (size_t j = 0; j < content->size(); ++j) {
        const json& b = (*content)[j];
        const std::string bpath = fmt::format("{}[{}]", cpath, j);
        if (!b.is_object()) wrong_type(bpath, "an object", b);
        const std::string& type = get_string(b, "type", bpath);
        if (type == "text") {
            text.push_back(text_part(b, bpath));
        } else if (type == "image") {
            if (role != "user") invalid(bpath + ".type", "image blocks belong to user messages");
            text.push_back(image_part(b, bpath));
        } else if (type == "tool_use") {
            if (role != "assistant") invalid(bpath + ".type", "tool_use blocks belong to assistant messages");
            only_keys(b, bpath, {"type", "id", "name", "input", "cache_control"});
            check_cache_control(b, bpath);
            const json* input = field(b, "input");
            if (!input || !input->is_object()) wrong_type(bpath + ".input", "an object", input ? *input : json());
            calls.push_back({{"id", get_string(b, "id", bpath)},
                             {"type", "function"},
                             {"function", {{"name", get_string(b, "name", bpath)}, {"arguments", input->dump()}}}});
        } else if (type == "tool_result") {
            if (role != "user") invalid(bpath + ".type", "tool_result blocks belong to user messages");
            only_keys(b, bpath, {"type", "tool_use_id", "content", "is_error", "cache_control"});
            check_cache_control(b, bpath);
            const std::string& id = get_string(b, "tool_use_id", bpath);
            json result = "";
            if (const json* c = field(b, "content")) result = text_content(*c, bpath + ".content");
            if (const json* e = field(b, "is_error")) {
                if (!e->is_boolean()) wrong_type(bpath + ".is_error", "a boolean", *e);
                // The templates know no error flag; the model reads it as the result's first word.
                if (e->get<bool>()) {
                    if (result.is_string()) result = "Error: " + result.get<std::string>();
                    else result.insert(result.begin(), json{{"type", "text"}, {"text", "Error: "}});
                }
            }
            out.messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(result)}});
            out.origin.push_back(bpath);
        } else if (type == "thinking") {
            if (role != "assistant") invalid(bpath + ".type", "thinking blocks belong to assistant messages");
            only_keys(b, bpath, {"type", "thinking", "signature", "cache_control"});
            check_cache_control(b, bpath);
            reasoning += get_string(b, "thinking", bpath);
        } else if (type == "redacted_thinking") {
            unsupported(bpath, "redacted thinking is encrypted by Anthropic's servers and cannot be read here");
        } else {
            unsupported(bpath + ".type", fmt::format("'{}' blocks are not served (only {})", type, kBlockTypes));
        }
    }
    if (role == "user" && text.empty()) return;  // only tool results
    if (last && role == "assistant") {
        // A prefill: the model continues this text (the chat template leaves the turn open), and the
        // reply holds only what it adds, as Anthropic's API does.
        if (!calls.empty() || !reasoning.empty())
            invalid(path, "a final assistant message (a prefill) holds text only: the model continues it");
        if (text.empty()) invalid(cpath, "a final assistant message (a prefill) needs text to continue");
        const json& tail = text.back().is_string() ? text.back() : text.back()["text"];
        check_prefill_end(tail.get_ref<const std::string&>(), cpath);
        out.prefill = true;
    }
    json msg = {{"role", role}, {"content", text.empty() ? json("") : std::move(text)}};
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    if (!reasoning.empty()) msg["reasoning_content"] = std::move(reasoning);
    out.messages.push_back(std::move(msg));
    out.origin.push_back(path);
}

json translate_tools(const json& tools) {
    if (!tools.is_array()) wrong_type("tools", "an array", tools);
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& t = tools[i];
        const std::string path = fmt::format("tools[{}]", i);
        if (!t.is_object()) wrong_type(path, "an object", t);
        if (const json* type = field(t, "type"); type && *type != "custom")
            unsupported(path + ".type", fmt::format("{} is a server tool, which is not available here; define the "
                                                    "tool yourself (name, description, input_schema) and run it "
                                                    "client-side",
                                                    type->dump()));
        only_keys(t, path, {"type", "name", "description", "input_schema", "cache_control"});
        check_cache_control(t, path);
        json fn = {{"name", get_string(t, "name", path)}};
        if (const json* d = field(t, "description")) fn["description"] = *d;
        const json* schema = field(t, "input_schema");
        if (!schema || !schema->is_object()) wrong_type(path + ".input_schema", "an object (a JSON schema)", schema ? *schema : json());
        fn["parameters"] = *schema;
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

void translate_tool_choice(const json& v, json& chat) {
    if (!v.is_object()) wrong_type("tool_choice", "an object", v);
    const std::string& type = get_string(v, "type", "tool_choice");
    if (type == "tool") only_keys(v, "tool_choice", {"type", "name", "disable_parallel_tool_use"});
    else if (type == "none") only_keys(v, "tool_choice", {"type"});
    else only_keys(v, "tool_choice", {"type", "disable_parallel_tool_use"});
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool")
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", get_string(v, "name", "tool_choice")}}}};
    else invalid("tool_choice.type", fmt::format("must be \"auto\", \"any\", \"tool\" or \"none\", got \"{}\"", type));
    if (const json* d = field(v, "disable_parallel_tool_use")) {
        if (!d->is_boolean()) wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
        chat["parallel_tool_calls"] = !d->get<bool>();
    }
}

// thinking -> enabled (true) or disabled (false). budget_tokens is checked as Anthropic does
// (below max_tokens, which counts thinking too) and becomes the chat request's
// thinking_token_budget: the server closes the thinking at that many tokens.
bool translate_thinking(const json& v, const json& body, MessagesRoute route, json& chat) {
    if (!v.is_object()) wrong_type("thinking", "an object", v);
    const std::string& type = get_string(v, "type", "thinking");
    if (type == "disabled") {
        only_keys(v, "thinking", {"type"});
        return false;
    }
    if (type != "enabled") invalid("thinking.type", fmt::format("must be \"enabled\" or \"disabled\", got \"{}\"", type));
    only_keys(v, "thinking", {"type", "budget_tokens"});
    const json* budget = field(v, "budget_tokens");
    if (!budget || !budget->is_number_integer()) wrong_type("thinking.budget_tokens", "an integer", budget ? *budget : json());
    if (budget->get<int64_t>() < 1) invalid("thinking.budget_tokens", "must be at least 1");
    const json* max_tokens = field(body, "max_tokens");
    if (route == MessagesRoute::messages && max_tokens && max_tokens->is_number_integer() &&
        budget->get<int64_t>() >= max_tokens->get<int64_t>())
        invalid("thinking.budget_tokens", "must be less than max_tokens (which counts the thinking too)");
    chat["thinking_token_budget"] = *budget;
    return true;
}

void check_metadata(const json& v) {
    if (!v.is_object()) wrong_type("metadata", "an object", v);
    only_keys(v, "metadata", {"user_id"});
    if (const json* u = field(v, "user_id"); u && !u->is_string()) wrong_type("metadata.user_id", "a string", *u);
}

void check_service_tier(const json& v) {
    if (!v.is_string()) wrong_type("service_tier", "a string", v);
    if (v != "auto" && v != "standard_only")
        unsupported("service_tier", fmt::format("'{}' is not offered: there is one tier (\"auto\" or \"standard_only\")",
                                                v.get<std::string>()));
}

// Anthropic's ranges, narrower than OpenAI's (temperature 0-1).
void check_unit_interval(const json& body, const char* name) {
    const json* v = field(body, name);
    if (!v) return;
    if (!v->is_number()) wrong_type(name, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0 || x > 1) invalid(name, "must be between 0 and 1", "out_of_range");
}

}  // namespace

const std::vector<RequestField>& anthropic_request_fields() {
    using enum FieldUse;
    constexpr bool M = true, C = true, _ = false;  // /v1/messages, /v1/messages/count_tokens
    static const std::vector<RequestField> fields = {
        {"model", M, C, honoured, "the served model's id or one of its LoRA adapters' (see LoRA adapters)"},
        {"messages", M, C, honoured, "text, tool_use, tool_result and thinking blocks"},
        {"system", M, C, honoured, "a string or text blocks"},
        {"max_tokens", M, _, honoured, "required"},
        {"stop_sequences", M, _, honoured, ""},
        {"stream", M, _, honoured, ""},
        {"temperature", M, _, honoured, "0 to 1"},
        {"top_p", M, _, honoured, ""},
        {"top_k", M, _, honoured, ""},
        {"tools", M, C, honoured, "client tools only; server tools are refused"},
        {"tool_choice", M, C, honoured, "auto, any, tool, none; disable_parallel_tool_use"},
        {"thinking", M, C, honoured, "enabled needs a template that thinks; budget_tokens closes the thinking at that many tokens"},
        {"metadata", M, _, no_op, "user_id for the provider's abuse monitoring; no output depends on it"},
        {"service_tier", M, _, no_op, "only \"auto\" or \"standard_only\": there is one tier"},
        {"container", M, _, refused, "code execution containers are not available"},
        {"mcp_servers", M, C, refused, "MCP connectors are not available; run the tools client-side"},
        {"context_management", M, _, refused, "context editing is not supported"},
    };
    return fields;
}

static AnthropicRequest read_anthropic_request(const json& body, MessagesRoute route) {
    const bool messages_route = route == MessagesRoute::messages;
    if (!body.is_object()) wrong_type("body", "a JSON object", body);
    const char* path = messages_route ? "/v1/messages" : "/v1/messages/count_tokens";
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it->is_null()) continue;
        const RequestField* known = nullptr;
        for (const auto& f : anthropic_request_fields())
            if (f.name == it.key() && (messages_route ? f.completions : f.chat)) known = &f;
        if (!known)
            throw ApiError::invalid(fmt::format("'{}' is not a parameter of {} here; it is refused rather than ignored "
                                                "(docs/api.md lists the fields)",
                                                it.key(), path),
                                    it.key(), "unsupported_parameter");
        if (known->use == FieldUse::refused) unsupported(it.key(), std::string(known->why));
    }

    AnthropicRequest out;
    json chat = json::object();
    if (const json* v = field(body, "model")) chat["model"] = *v;
    Translation t;
    if (const json* system = field(body, "system")) {
        t.messages.push_back({{"role", "system"}, {"content", text_content(*system, "system")}});
        t.origin.push_back("system");
    }
    const json* messages = field(body, "messages");
    if (!messages) throw ApiError::invalid("'messages' is required", "messages", "missing_required_parameter");
    if (!messages->is_array()) wrong_type("messages", "an array", *messages);
    if (messages->empty()) invalid("messages", "must contain at least one message");
    for (size_t i = 0; i < messages->size(); ++i) translate_message((*messages)[i], i, i + 1 == messages->size(), t);
    chat["messages"] = std::move(t.messages);
    if (t.prefill) {
        chat["continue_final_message"] = true;
        chat["add_generation_prompt"] = false;
    }
    out.message_origin = std::move(t.origin);

    if (const json* v = field(body, "tools")) chat["tools"] = translate_tools(*v);
    if (const json* v = field(body, "tool_choice")) translate_tool_choice(*v, chat);
    if (const json* v = field(body, "thinking")) {
        out.thinking = translate_thinking(*v, body, route, chat);
        if (*out.thinking && t.prefill)
            invalid("thinking", "extended thinking cannot continue a prefilled assistant message (the thinking would "
                                "have to come before the prefill)");
        chat["chat_template_kwargs"] = {{"enable_thinking", *out.thinking}};
    }
    if (!messages_route) {
        out.chat_body = std::move(chat);
        return out;
    }

    const json* max_tokens = field(body, "max_tokens");
    if (!max_tokens) throw ApiError::invalid("'max_tokens' is required", "max_tokens", "missing_required_parameter");
    chat["max_tokens"] = *max_tokens;
    if (const json* v = field(body, "stop_sequences")) {
        if (!v->is_array()) wrong_type("stop_sequences", "an array of strings", *v);
        chat["stop"] = *v;
    }
    check_unit_interval(body, "temperature");
    check_unit_interval(body, "top_p");
    for (const char* name : {"temperature", "top_p", "top_k", "stream"})
        if (const json* v = field(body, name)) chat[name] = *v;
    if (const json* v = field(body, "metadata")) check_metadata(*v);
    if (const json* v = field(body, "service_tier")) check_service_tier(*v);
    out.chat_body = std::move(chat);
    return out;
}

AnthropicRequest translate_anthropic_request(const json& body, MessagesRoute route, const nlohmann::ordered_json* ordered) {
    try {
        AnthropicRequest r = read_anthropic_request(body, route);
        // Checked above on the plain form; each input_schema again with its keys as sent.
        if (const auto* tools = ordered ? field(*ordered, "tools") : nullptr)
            for (size_t i = 0; i < tools->size(); ++i)
                r.chat_body["tools"][i]["function"]["parameters"] = tools->at(i).at("input_schema");
        return r;
    } catch (const JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

std::string AnthropicRequest::param(const std::string& p) const {
    static const std::regex tool(R"(^tools\[(\d{1,9})\]\.function\.(parameters|name|description)(.*)$)");
    static const std::regex message(R"(^messages\[(\d{1,9})\].*$)");
    std::smatch m;
    if (p == "stop" || p.starts_with("stop[")) return "stop_sequences" + p.substr(4);
    if (p.starts_with("chat_template_kwargs")) return "thinking";
    if (p == "thinking_token_budget") return "thinking.budget_tokens";
    if (p == "parallel_tool_calls") return "tool_choice.disable_parallel_tool_use";
    if (std::regex_match(p, m, tool))
        return fmt::format("tools[{}].{}{}", m[1].str(), m[2] == "parameters" ? "input_schema" : m[2].str(), m[3].str());
    if (std::regex_match(p, m, message)) {
        const size_t k = std::stoul(m[1].str());
        if (k < message_origin.size()) return message_origin[k];
    }
    return p;
}

}  // namespace pagoda::server
