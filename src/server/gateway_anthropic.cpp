// The gateway's Anthropic Messages API, apart from gateway.cpp: the body is translated into the
// equivalent chat request (anthropic_request.h) and started through start() like any
// /v1/chat/completions request — same validation, template, limits, keys and engine — and the Job
// turns the chat chunks into Anthropic events and the final message (anthropic_response.h).
// count_tokens renders the same prompt without running it.
#include <fmt/format.h>

#include "server/anthropic_request.h"
#include "server/gateway.h"
#include "server/lora_choice.h"
#include "server/openai_engine_request.h"
#include "server/tool_request.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// An error of the chat pipeline about the translated body, named by the Anthropic field.
ApiError renamed(const ApiError& e, const AnthropicRequest& request) {
    if (e.param.empty()) return e;
    const std::string param = request.param(e.param);
    if (param == e.param) return e;
    std::string message = e.what();
    const std::string quoted = "'" + e.param;
    for (size_t at = message.find(quoted); at != std::string::npos; at = message.find(quoted, at + param.size() + 1))
        message.replace(at + 1, e.param.size(), param);
    ApiError out(e.status, message, e.type, param, e.code);
    out.retry_after = e.retry_after;
    return out;
}

}  // namespace

std::vector<json> Job::add_message(size_t sub, const engine::Delta& delta) {
    std::vector<json> events;
    for (const json& chunk : assembler_.add(sub, delta))
        for (json& e : messages_->add_chunk(chunk, delta.stop_string)) events.push_back(std::move(e));
    // A failed request ends with an error event instead (the transport sends it).
    if (assembler_.done() && !failure())
        for (json& e : messages_->finish(assembler_.prompt_tokens(), assembler_.completion_tokens()))
            events.push_back(std::move(e));
    return events;
}

std::shared_ptr<Job> Gateway::start_messages(const nlohmann::ordered_json& body, const ApiKey* key, const std::string& request_id,
                                             DeltaSink sink, std::string response_id) {
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);
    AnthropicRequest request;
    try {
        request = translate_anthropic_request(json(body), MessagesRoute::messages, &body);
        if (request.thinking == true && !split_reasoning_)
            throw ApiError::invalid("'thinking' enabled needs a model that thinks: this chat template has no <think> "
                                    "reasoning (or the server runs with --reasoning-format none)",
                                    "thinking", "unsupported_parameter");
    } catch (const ApiError&) {
        metrics_.on_rejection(key_name, "invalid");
        throw;
    }
    if (response_id.empty()) response_id = new_request_id();
    std::shared_ptr<Job> job;
    try {
        job = start(Endpoint::chat_completions, request.chat_body, key, request_id, std::move(sink), response_id);
    } catch (const ApiError& e) {
        throw renamed(e, request);
    }
    // max_tokens is required here, so the reservation is exactly the prompt plus it (one choice).
    const int64_t input_tokens = job->reserved_tokens_ - *job->params().max_tokens;
    job->messages_ = std::make_unique<MessageBuilder>(
        "msg_" + response_id, served_model_id(options_.model_name, job->params().model), input_tokens);
    return job;
}

SimpleResponse Gateway::count_message_tokens(const nlohmann::ordered_json& body, const ApiKey* key) {
    const std::string key_name = key ? key->name : "anonymous";
    admit_or_throw(key_name);
    TokenizedPrompts prompts;
    try {
        AnthropicRequest request = translate_anthropic_request(json(body), MessagesRoute::count_tokens, &body);
        if (request.thinking == true && !split_reasoning_)
            throw ApiError::invalid("'thinking' enabled needs a model that thinks: this chat template has no <think> "
                                    "reasoning",
                                    "thinking", "unsupported_parameter");
        CompletionParams p;
        try {
            p = parse_completion_request(request.chat_body, Endpoint::chat_completions);
            apply_tools(p, template_ ? &*template_ : nullptr);
            std::vector<vision::EncodedImage> images = encode_images(p);  // counted as they run
            prompts = tokenize_prompts(p, *engine_->tokenizer(), template_ ? &*template_ : nullptr,
                                       engine_->model_info().vocab_size, {},
                                       images_ ? std::string_view(images_->marker()) : std::string_view(kImageMarker));
            if (!images.empty()) images_->expand(prompts.prompts.at(0), std::move(images));
        } catch (const ApiError& e) {
            throw renamed(e, request);
        }
        if (!p.model.empty() && p.model != options_.model_name && !(loras_ && loras_->has(p.model)))
            throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", p.model,
                                            options_.model_name),
                           "invalid_request_error", "model", "model_not_found");
    } catch (const ApiError&) {
        metrics_.on_rejection(key_name, "invalid");
        throw;
    }
    return {200, "application/json", dump_json(json{{"input_tokens", prompts.total()}})};
}

}  // namespace pagoda::server
