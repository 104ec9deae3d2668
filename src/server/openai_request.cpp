#include "server/openai_request.h"

#include <fmt/format.h>

#include "core/json_reader.h"
#include "server/api_error.h"
#include "server/image_parts.h"
#include "server/openai_request_parts.h"
#include "server/request_fields.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;
using namespace json_reader;

// llama-server's multimodal prompt: {"prompt_string": "... <__media__> ...", "multimodal_data":
// ["<base64>", ...]}, one image per marker, in order (image_parts.h).
void parse_prompt_object(const json& prompt, CompletionParams& p) {
    for (auto it = prompt.begin(); it != prompt.end(); ++it)
        if (it.key() != "prompt_string" && it.key() != "multimodal_data")
            throw ApiError::invalid(fmt::format("'prompt.{}' is not a field of a prompt object (prompt_string, "
                                                "multimodal_data)",
                                                it.key()),
                                    "prompt." + it.key(), "unsupported_parameter");
    const std::string& text = read_string(required(prompt, "prompt_string", "prompt.prompt_string"), "prompt.prompt_string");
    p.prompts.emplace_back(text);
    if (const json* data = field(prompt, "multimodal_data")) {
        read_array(*data, "prompt.multimodal_data", "an array of base64 strings");
        for (size_t i = 0; i < data->size(); ++i)
            p.multimodal_data.push_back(read_string((*data)[i], fmt::format("prompt.multimodal_data[{}]", i)));
    }
    const size_t markers = count_media_markers(text);
    if (markers != p.multimodal_data.size())
        throw ApiError::invalid(fmt::format("'prompt.prompt_string' holds {} media markers ({}) for {} items of "
                                            "'prompt.multimodal_data': one marker per image",
                                            markers, kMediaMarker, p.multimodal_data.size()),
                                "prompt.multimodal_data", "invalid_value");
}

void parse_prompt(const json& body, CompletionParams& p) {
    const json* prompt = field(body, "prompt");
    if (!prompt) missing("prompt");
    if (prompt->is_string()) {
        p.prompts.emplace_back(prompt->get<std::string>());
        return;
    }
    if (prompt->is_object()) return parse_prompt_object(*prompt, p);
    read_array(*prompt, "prompt", "a string, an array of strings, an array of token ids or a prompt object");
    if (prompt->empty()) bad_value("prompt", "must not be an empty array");
    if ((*prompt)[0].is_number()) {  // one prompt as token ids
        p.prompts.emplace_back(openai_fields::token_array(*prompt, "prompt"));
        return;
    }
    for (size_t i = 0; i < prompt->size(); ++i) {  // several prompts: strings or token arrays
        const json& item = (*prompt)[i];
        const std::string name = fmt::format("prompt[{}]", i);
        if (item.is_string()) p.prompts.emplace_back(item.get<std::string>());
        else if (item.is_array() && !item.empty()) p.prompts.emplace_back(openai_fields::token_array(item, name));
        else if (item.is_object())
            throw ApiError::invalid(fmt::format("'{}': a prompt object (prompt_string, multimodal_data) is served as "
                                                "the request's only prompt, not in an array of prompts",
                                                name),
                                    name, "unsupported_parameter");
        else wrong_type(name, "a string or a non-empty array of token ids", item);
    }
}

// Completions: logprobs (an integer), echo, suffix.
void parse_completion_output(const json& body, CompletionParams& p) {
    if (const json* v = field(body, "logprobs")) p.logprobs = int32_t(read_integer(*v, "logprobs", 0, 20));
    if (const json* v = field(body, "echo")) p.echo = read_bool(*v, "echo");
    if (const json* v = field(body, "suffix")) {
        const std::string& suffix = read_string(*v, "suffix");
        // Fill in the middle: each prompt is the text before the hole (empty: plain completion).
        if (!suffix.empty()) {
            if (p.echo)
                throw ApiError::invalid("'echo' together with a non-empty 'suffix' is not supported", "echo",
                                        "unsupported_parameter");
            if (!p.multimodal_data.empty())
                throw ApiError::invalid("'suffix' (fill in the middle) together with 'prompt.multimodal_data' is not "
                                        "supported",
                                        "suffix", "unsupported_parameter");
            p.fim = FimRequest{.suffix = suffix};
        }
    }
}

void parse_stream_options(const json& body, CompletionParams& p) {
    if (const json* v = field(body, "stream")) p.stream = read_bool(*v, "stream");
    const json* v = field(body, "stream_options");
    if (!v) return;
    read_object(*v, "stream_options");
    for (auto it = v->begin(); it != v->end(); ++it) {
        const std::string name = "stream_options." + it.key();
        if (it->is_null()) continue;
        if (it.key() == "include_usage") {
            p.include_usage = read_bool(*it, name);
        } else if (it.key() == "include_obfuscation") {
            // OpenAI pads stream chunks against length side channels; pagoda sends no padding.
            if (read_bool(*it, name))
                throw ApiError::invalid("'stream_options.include_obfuscation' true is not supported: chunks carry "
                                        "no padding",
                                        name, "unsupported_parameter");
        } else {
            throw ApiError::invalid(fmt::format("'{}' is not a stream option here (include_usage, include_obfuscation)",
                                                name),
                                    name, "unsupported_parameter");
        }
    }
}

// The no-ops of request_fields.h whose every value is a no-op only within limits: those values
// are checked here, the rest refused (store: true would ask for storage nobody provides).
void check_no_op_values(const json& body) {
    for (const char* name : {"user", "safety_identifier", "prompt_cache_key"})
        if (const json* v = field(body, name)) read_string(*v, name);
    if (const json* v = field(body, "metadata")) read_object(*v, "metadata");
    if (const json* v = field(body, "store"); v && read_bool(*v, "store"))
        throw ApiError::invalid("'store' true is not supported: this server stores no completions", "store",
                                "unsupported_parameter");
    if (const json* v = field(body, "service_tier")) {
        const std::string& tier = read_string(*v, "service_tier");
        if (tier != "auto" && tier != "default")
            throw ApiError::invalid(fmt::format("'service_tier' '{}' is not offered: there is one tier ('auto' or "
                                                "'default')",
                                                tier),
                                    "service_tier", "unsupported_parameter");
    }
    if (const json* v = field(body, "modalities")) {
        read_array(*v, "modalities");
        for (size_t i = 0; i < v->size(); ++i)
            if ((*v)[i] != "text")
                throw ApiError::invalid("'modalities' may only hold \"text\": text is the only output", "modalities",
                                        "unsupported_parameter");
    }
    if (const json* v = field(body, "skip_special_tokens"); v && !read_bool(*v, "skip_special_tokens"))
        throw ApiError::invalid("'skip_special_tokens' false is not supported: control tokens are never written as "
                                "text",
                                "skip_special_tokens", "unsupported_parameter");
    if (const json* v = field(body, "cache_prompt")) read_bool(*v, "cache_prompt");
}

// `ordered`: the same body with its keys in the order sent, where the caller has it.
CompletionParams parse_fields(const json& body, Endpoint endpoint, const nlohmann::ordered_json* ordered) {
    if (!body.is_object()) wrong_type("body", "a JSON object", body);
    check_request_fields(body, endpoint);
    CompletionParams p;
    p.endpoint = endpoint;
    const bool chat = endpoint == Endpoint::chat_completions;
    check_no_op_values(body);
    if (const json* v = field(body, "model")) p.model = read_string(*v, "model");
    if (const json* v = field(body, "lora")) p.lora = parse_lora_field(*v);
    if (const json* v = field(body, "prompt_logprobs")) p.prompt_logprobs = int32_t(read_integer(*v, "prompt_logprobs", 0, 20));
    if (chat) openai_fields::parse_chat_fields(body, p, ordered);
    else parse_prompt(body, p);
    openai_fields::parse_sampling(body, p);
    if (!chat) parse_completion_output(body, p);
    openai_fields::parse_structured_output(body, p, ordered);
    if (p.grammar && (p.tool_choice == ToolChoice::required || p.tool_choice == ToolChoice::function))
        throw ApiError::invalid("'tool_choice' that forces a call constrains the output itself: not together with "
                                "'response_format' or 'grammar'",
                                "tool_choice", "invalid_value");
    parse_stream_options(body, p);
    if (int64_t(p.prompts.size()) * p.n > kMaxChoices)
        bad_value("n", fmt::format("times the number of prompts must be at most {}", kMaxChoices));
    return p;
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
        case Endpoint::rerank: return "rerank";
        case Endpoint::score: return "score";
    }
    return "?";
}

nlohmann::ordered_json parse_json_body(std::string_view bytes) {
    if (bytes.empty()) throw ApiError::invalid("the request body is empty; send a JSON object", {}, "invalid_json");
    try {
        return nlohmann::ordered_json::parse(bytes.begin(), bytes.end());
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
    try {
        return parse_fields(body, endpoint, nullptr);
    } catch (const JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

CompletionParams parse_completion_request(const nlohmann::ordered_json& body, Endpoint endpoint) {
    const json plain = body;
    if (endpoint == Endpoint::infill) return parse_infill_request(plain);
    try {
        return parse_fields(plain, endpoint, &body);
    } catch (const JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

}  // namespace pagoda::server
