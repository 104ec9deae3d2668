#include "server/anthropic_response.h"

#include <fmt/format.h>

namespace pagoda::server {

using json = nlohmann::json;

const char* anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_string) {
    if (finish_reason == "length") return "max_tokens";
    if (finish_reason == "tool_calls") return "tool_use";
    return stop_string.empty() ? "end_turn" : "stop_sequence";
}

json anthropic_error_body(const ApiError& e) {
    const char* type = "api_error";
    switch (e.status) {
        case 401: type = "authentication_error"; break;
        case 403: type = "permission_error"; break;
        case 404: type = "not_found_error"; break;
        case 413: type = "request_too_large"; break;
        case 429: type = "rate_limit_error"; break;
        case 503: type = "overloaded_error"; break;
        default: type = e.status < 500 ? "invalid_request_error" : "api_error";
    }
    return json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

std::string anthropic_sse(const json& event) {
    return fmt::format("event: {}\ndata: {}\n\n", event.value("type", std::string("message")), dump_json(event));
}

MessageBuilder::MessageBuilder(std::string id, std::string model, int64_t input_tokens)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

std::vector<json> MessageBuilder::opening_events() const {
    json start = message();
    start["content"] = json::array();
    return {json{{"type", "message_start"}, {"message", std::move(start)}}};
}

void MessageBuilder::close_block(std::vector<json>& out) {
    if (!open_) return;
    const size_t b = *open_;
    open_.reset();
    out.push_back({{"type", "content_block_stop"}, {"index", b}});
}

void MessageBuilder::open_block(json block, std::vector<json>& out) {
    close_block(out);
    open_ = content_.size();
    tool_arguments_.emplace_back();
    tool_index_.push_back(-1);
    out.push_back({{"type", "content_block_start"}, {"index", *open_}, {"content_block", block}});
    content_.push_back(std::move(block));
}

void MessageBuilder::delta(json d, std::vector<json>& out) {
    out.push_back({{"type", "content_block_delta"}, {"index", *open_}, {"delta", std::move(d)}});
}

std::vector<json> MessageBuilder::add_chunk(const json& chunk, const std::string& stop_string) {
    std::vector<json> out;
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
    const json& choice = (*choices)[0];
    const json delta_in = choice.value("delta", json::object());
    auto text_of = [&](const char* key) {
        auto it = delta_in.find(key);
        return it != delta_in.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto open_is = [&](const char* type) { return open_ && content_[*open_]["type"] == type; };

    if (std::string thinking = text_of("reasoning_content"); !thinking.empty()) {
        // Thinking from a template carries no signature (nothing here signs it); the SDKs want the field.
        if (!open_is("thinking")) open_block({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
        content_[*open_]["thinking"] = content_[*open_]["thinking"].get<std::string>() + thinking;
        delta({{"type", "thinking_delta"}, {"thinking", std::move(thinking)}}, out);
    }
    if (std::string text = text_of("content"); !text.empty()) {
        if (!open_is("text")) open_block({{"type", "text"}, {"text", ""}}, out);
        content_[*open_]["text"] = content_[*open_]["text"].get<std::string>() + text;
        delta({{"type", "text_delta"}, {"text", std::move(text)}}, out);
    }
    if (auto calls = delta_in.find("tool_calls"); calls != delta_in.end() && calls->is_array()) {
        for (const json& call : *calls) {
            const int64_t index = call.value("index", int64_t(0));
            const json fn = call.value("function", json::object());
            if (call.contains("id")) {  // a call's first delta
                const std::string short_id = id_.starts_with("msg_") ? id_.substr(4) : id_;
                open_block({{"type", "tool_use"},
                            {"id", fmt::format("toolu_{}_{}", short_id, index)},
                            {"name", fn.value("name", std::string())},
                            {"input", json::object()}},
                           out);
                tool_index_.back() = index;
            }
            // Later pieces go to their call's block: the open one, as calls stream one after another.
            std::optional<size_t> block;
            for (size_t b = content_.size(); b-- > 0 && !block;)
                if (tool_index_[b] == index) block = b;
            std::string arguments = fn.value("arguments", std::string());
            if (!block || arguments.empty()) continue;
            tool_arguments_[*block] += arguments;
            out.push_back({{"type", "content_block_delta"},
                           {"index", *block},
                           {"delta", {{"type", "input_json_delta"}, {"partial_json", std::move(arguments)}}}});
        }
    }
    if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
        stop_reason_ = anthropic_stop_reason(f->get<std::string>(), stop_string);
        if (*stop_reason_ == std::string("stop_sequence")) stop_sequence_ = stop_string;
    }
    return out;
}

std::vector<json> MessageBuilder::finish(int64_t input_tokens, int64_t output_tokens) {
    std::vector<json> out;
    close_block(out);
    input_tokens_ = input_tokens;
    output_tokens_ = output_tokens;
    if (!stop_reason_) stop_reason_ = "end_turn";
    out.push_back({{"type", "message_delta"},
                   {"delta", {{"stop_reason", *stop_reason_}, {"stop_sequence", stop_sequence_ ? json(*stop_sequence_) : json(nullptr)}}},
                   {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", output_tokens_}}}});
    out.push_back({{"type", "message_stop"}});
    return out;
}

json MessageBuilder::message() const {
    json content = content_;
    // A tool_use block's input is its streamed arguments parsed; arguments a model wrote as a
    // string that is not JSON stay that string (the SDKs type input as unknown).
    for (size_t b = 0; b < content.size(); ++b) {
        if (tool_index_[b] < 0 || tool_arguments_[b].empty()) continue;
        json input = json::parse(tool_arguments_[b], nullptr, false);
        content[b]["input"] = input.is_discarded() ? json(tool_arguments_[b]) : std::move(input);
    }
    return json{{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)},
                {"stop_reason", stop_reason_ ? json(*stop_reason_) : json(nullptr)},
                {"stop_sequence", stop_sequence_ ? json(*stop_sequence_) : json(nullptr)},
                {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", output_tokens_}}}};
}

}  // namespace pagoda::server
