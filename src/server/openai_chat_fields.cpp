// The chat fields of /v1/chat/completions (openai_request_parts.h): messages, tools, tool_choice,
// logprobs, chat_template_kwargs and how the prompt ends (add_generation_prompt,
// continue_final_message).
#include <cctype>
#include <fmt/format.h>

#include "core/json_reader.h"
#include "server/api_error.h"
#include "server/image_parts.h"
#include "server/openai_request_parts.h"

namespace pagoda::server::openai_fields {
namespace {

using json = nlohmann::json;
using namespace json_reader;

// Assistant tool_calls and tool messages, which the template renders.
void check_tool_messages(const json& m, const std::string& role, const std::string& name) {
    if (role == "tool") {
        const json* id = field(m, "tool_call_id");
        if (!id || !id->is_string())
            throw ApiError::invalid(fmt::format("'{}.tool_call_id' must be a string (the id of the call answered)", name),
                                    name + ".tool_call_id", "invalid_type");
    }
    const json* calls = field(m, "tool_calls");
    if (!calls) return;
    if (role != "assistant")
        throw ApiError::invalid(fmt::format("'{}.tool_calls' is only for assistant messages", name), name + ".tool_calls",
                                "invalid_value");
    read_array(*calls, name + ".tool_calls");
    for (size_t k = 0; k < calls->size(); ++k) {
        const std::string cname = fmt::format("{}.tool_calls[{}]", name, k);
        const json& c = read_object((*calls)[k], cname);
        const json* fn = field(c, "function");
        if (!fn || !fn->is_object()) wrong_type(cname + ".function", "an object", fn ? *fn : json());
        const json* fname = field(*fn, "name");
        if (!fname || !fname->is_string()) wrong_type(cname + ".function.name", "a string", fname ? *fname : json());
        if (const json* args = field(*fn, "arguments")) read_string(*args, cname + ".function.arguments");
    }
}

void check_content(const json& m, const std::string& name) {
    const json* content = field(m, "content");
    if (!content || content->is_string()) return;
    read_array(*content, name + ".content", "a string, an array of parts or null");
    for (size_t j = 0; j < content->size(); ++j) {
        const std::string pname = fmt::format("{}.content[{}]", name, j);
        const json& part = read_object((*content)[j], pname);
        const json* type = field(part, "type");
        if (type && *type == "image_url") {
            check_image_part(part, pname);  // image_parts.h; the gateway reads the image
            continue;
        }
        if (!type || !type->is_string() || *type != "text")
            throw ApiError::invalid(fmt::format("'{}' has an unsupported type: only text and image_url parts are "
                                                "supported", pname),
                                    pname, "invalid_value");
        const json* text = field(part, "text");
        if (!text || !text->is_string()) wrong_type(pname + ".text", "a string", text ? *text : json());
    }
}

void parse_messages(const json& body, CompletionParams& p) {
    const json* messages = field(body, "messages");
    if (!messages) missing("messages");
    read_array(*messages, "messages");
    if (messages->empty()) bad_value("messages", "must contain at least one message");
    for (size_t i = 0; i < messages->size(); ++i) {
        const std::string name = fmt::format("messages[{}]", i);
        const json& m = read_object((*messages)[i], name);
        const json* role = field(m, "role");
        if (!role || !role->is_string())
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
        check_tool_messages(m, r, name);
        check_content(m, name);
    }
    p.messages = *messages;
}

bool valid_function_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    return true;
}

void check_tool(const json& tools, size_t i) {
    const std::string name = fmt::format("tools[{}]", i);
    const json& t = read_object(tools[i], name);
    const json* type = field(t, "type");
    if (!type || !type->is_string() || *type != "function")
        throw ApiError::invalid(fmt::format("'{}.type' must be 'function' (the only tool type supported)", name),
                                name + ".type", "unsupported_parameter");
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) wrong_type(name + ".function", "an object", fn ? *fn : json());
    const json* fname = field(*fn, "name");
    if (!fname || !fname->is_string() || !valid_function_name(fname->get<std::string>()))
        throw ApiError::invalid(fmt::format("'{}.function.name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -", name),
                                name + ".function.name", "invalid_value");
    for (size_t j = 0; j < i; ++j)
        if (tools[j]["function"]["name"] == *fname)
            throw ApiError::invalid(fmt::format("'{}.function.name' repeats the name of tools[{}]", name, j),
                                    name + ".function.name", "invalid_value");
    if (const json* params = field(*fn, "parameters"))
        read_object(*params, name + ".function.parameters", "an object (a JSON schema)");
    if (const json* d = field(*fn, "description")) read_string(*d, name + ".function.description");
    if (const json* st = field(*fn, "strict")) read_bool(*st, name + ".function.strict");
}

void parse_tool_choice(const json& v, CompletionParams& p, bool have_tools) {
    if (v.is_string()) {
        const std::string c = v.get<std::string>();
        if (c == "auto") p.tool_choice = ToolChoice::automatic;
        else if (c == "none") p.tool_choice = ToolChoice::none;
        else if (c == "required") p.tool_choice = ToolChoice::required;
        else
            throw ApiError::invalid(fmt::format("'tool_choice' must be 'auto', 'none', 'required' or a function, got '{}'",
                                                c),
                                    "tool_choice", "invalid_value");
    } else if (v.is_object()) {
        const json* type = field(v, "type");
        const json* fn = field(v, "function");
        const json* fname = fn ? field(*fn, "name") : nullptr;
        if (!type || *type != "function" || !fname || !fname->is_string())
            throw ApiError::invalid("'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                                    "{\"name\": ...}}",
                                    "tool_choice", "invalid_value");
        p.tool_choice = ToolChoice::function;
        p.tool_choice_function = fname->get<std::string>();
        bool found = false;
        if (have_tools)
            for (const auto& t : p.tools) found = found || t["function"]["name"] == fname->get<std::string>();
        if (!found)
            throw ApiError::invalid(fmt::format("'tool_choice' names function '{}', which is not in 'tools'",
                                                p.tool_choice_function),
                                    "tool_choice", "invalid_value");
    } else {
        wrong_type("tool_choice", "a string or an object", v);
    }
    if (p.tool_choice == ToolChoice::required && !have_tools)
        throw ApiError::invalid("'tool_choice' is 'required' but no 'tools' are given", "tool_choice", "invalid_value");
}

void parse_tools(const json& body, CompletionParams& p, const nlohmann::ordered_json* ordered) {
    if (const json* v = field(body, "tools")) {
        read_array(*v, "tools");
        for (size_t i = 0; i < v->size(); ++i) check_tool(*v, i);
        p.tools = ordered ? ordered->at("tools") : nlohmann::ordered_json(*v);
    }
    const bool have_tools = p.tools.is_array() && !p.tools.empty();
    if (const json* v = field(body, "tool_choice")) parse_tool_choice(*v, p, have_tools);
    if (const json* v = field(body, "parallel_tool_calls")) p.parallel_tool_calls = read_bool(*v, "parallel_tool_calls");
}

// vLLM's add_generation_prompt and continue_final_message: the prompt either opens the assistant's
// turn (the default), ends after the last message, or continues the last (assistant) message.
void parse_prompt_ending(const json& body, CompletionParams& p) {
    const json* add = field(body, "add_generation_prompt");
    if (add) p.add_generation_prompt = read_bool(*add, "add_generation_prompt");
    if (const json* v = field(body, "continue_final_message")) p.continue_final_message = read_bool(*v, "continue_final_message");
    if (!p.continue_final_message) return;
    if (add && p.add_generation_prompt)
        throw ApiError::invalid("'continue_final_message' continues the last message, so 'add_generation_prompt' "
                                "must not be true with it",
                                "add_generation_prompt", "invalid_value");
    p.add_generation_prompt = false;
    const json& last = p.messages.back();
    if (last["role"] != "assistant")
        throw ApiError::invalid("'continue_final_message' needs the last message to be the assistant's (the text to "
                                "continue)",
                                "continue_final_message", "invalid_value");
    if (const json* calls = field(last, "tool_calls"); calls && !calls->empty())
        throw ApiError::invalid("'continue_final_message' cannot continue a message with tool_calls",
                                "continue_final_message", "invalid_value");
}

}  // namespace

void parse_chat_fields(const json& body, CompletionParams& p, const nlohmann::ordered_json* ordered) {
    parse_messages(body, p);
    bool want = false;
    if (const json* v = field(body, "logprobs")) want = read_bool(*v, "logprobs");
    int32_t top = 0;
    if (const json* v = field(body, "top_logprobs")) {
        top = int32_t(read_integer(*v, "top_logprobs", 0, 20));
        if (!want) throw ApiError::invalid("'top_logprobs' needs 'logprobs' set to true", "top_logprobs", "invalid_value");
    }
    if (want) p.logprobs = top;
    parse_tools(body, p, ordered);
    if (const json* v = field(body, "chat_template_kwargs")) {
        read_object(*v, "chat_template_kwargs");
        // The variables the server itself sets are not the client's to replace.
        for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
            if (v->contains(reserved))
                throw ApiError::invalid(fmt::format("'chat_template_kwargs.{}' is set by the server and cannot be "
                                                    "overridden",
                                                    reserved),
                                        fmt::format("chat_template_kwargs.{}", reserved), "invalid_value");
        p.chat_template_kwargs = *v;
    }
    parse_prompt_ending(body, p);
}

}  // namespace pagoda::server::openai_fields
