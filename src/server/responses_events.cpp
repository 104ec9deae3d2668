#include "server/responses_events.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace pagoda::server {

using json = nlohmann::json;

std::string responses_sse(const json& event) {
    return fmt::format("event: {}\ndata: {}\n\n", event.value("type", "message"), dump_json(event));
}

ResponsesStream::ResponsesStream(ResponsesContext ctx) : ctx_(std::move(ctx)) {
    opening_.push_back(event("response.created", {{"response", response()}}));
    opening_.push_back(event("response.in_progress", {{"response", response()}}));
}

json ResponsesStream::event(const char* type, json fields) {
    json e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(it.value());
    return e;
}

std::string ResponsesStream::item_id(const char* prefix) const {
    // "resp_<hex>" -> "<prefix>_<hex>_<output index>": unique per response and per item.
    const std::string tail = ctx_.id.starts_with("resp_") ? ctx_.id.substr(5) : ctx_.id;
    return fmt::format("{}_{}_{}", prefix, tail, output_.size());
}

void ResponsesStream::open_item(Kind kind, json item, std::vector<json>& out) {
    const size_t index = output_.size();
    output_.push_back(item);
    open_ = kind;
    text_.clear();
    out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}}));
    const json& id = output_[index]["id"];
    if (kind == Kind::message) {
        out.push_back(event("response.content_part.added",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                             {"part", {{"type", "output_text"}, {"annotations", json::array()}, {"logprobs", json::array()},
                                       {"text", ""}}}}));
    } else if (kind == Kind::reasoning && !ctx_.reasoning_summary.is_null()) {
        out.push_back(event("response.reasoning_summary_part.added",
                            {{"item_id", id}, {"output_index", index}, {"summary_index", 0},
                             {"part", {{"type", "summary_text"}, {"text", ""}}}}));
    } else if (kind == Kind::reasoning) {
        out.push_back(event("response.content_part.added",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                             {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
    }
}

void ResponsesStream::text_delta(Kind kind, const std::string& delta, std::vector<json>& out) {
    if (open_ != kind) {
        close_item("completed", out);
        if (kind == Kind::message)
            open_item(kind, {{"id", item_id("msg")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                             {"content", json::array()}}, out);
        else if (ctx_.reasoning_summary.is_null())
            open_item(kind, {{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
                             {"content", json::array()}}, out);
        else
            open_item(kind, {{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()}}, out);
    }
    text_ += delta;
    const size_t index = output_.size() - 1;
    const json& id = output_[index]["id"];
    if (kind == Kind::message)
        out.push_back(event("response.output_text.delta", {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                                                           {"delta", delta}, {"logprobs", json::array()}}));
    else if (!ctx_.reasoning_summary.is_null())
        out.push_back(event("response.reasoning_summary_text.delta",
                            {{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"delta", delta}}));
    else
        out.push_back(event("response.reasoning_text.delta",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"delta", delta}}));
}

void ResponsesStream::close_item(const char* status, std::vector<json>& out) {
    if (open_ == Kind::none) return;
    const size_t index = output_.size() - 1;
    json& item = output_[index];
    const json id = item["id"];
    if (open_ == Kind::message) {
        json part = {{"type", "output_text"}, {"annotations", json::array()}, {"logprobs", json::array()}, {"text", text_}};
        out.push_back(event("response.output_text.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                                                          {"text", text_}, {"logprobs", json::array()}}));
        out.push_back(event("response.content_part.done",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
        item["content"] = json::array({part});
        item["status"] = status;
    } else if (open_ == Kind::reasoning && !ctx_.reasoning_summary.is_null()) {
        json part = {{"type", "summary_text"}, {"text", text_}};
        out.push_back(event("response.reasoning_summary_text.done",
                            {{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"text", text_}}));
        out.push_back(event("response.reasoning_summary_part.done",
                            {{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"part", part}}));
        item["summary"] = json::array({part});
    } else if (open_ == Kind::reasoning) {
        json part = {{"type", "reasoning_text"}, {"text", text_}};
        out.push_back(event("response.reasoning_text.done",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}}));
        out.push_back(event("response.content_part.done",
                            {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
        item["content"] = json::array({part});
    } else {
        out.push_back(event("response.function_call_arguments.done",
                            {{"item_id", id}, {"output_index", index}, {"name", item["name"]}, {"arguments", text_}}));
        item["arguments"] = text_;
        item["status"] = status;
    }
    out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
    open_ = Kind::none;
    open_call_index_ = -1;
    text_.clear();
}

// Reads the chunk defensively (any JSON is taken; what is not a chat chunk's shape is skipped), so
// the translator never throws whatever it is fed.
std::vector<json> ResponsesStream::feed(const json& chunk) {
    std::vector<json> out;
    if (closed_ || !chunk.is_object()) return out;
    auto member = [](const json& object, const char* key, json::value_t type) -> const json* {
        if (!object.is_object()) return nullptr;
        auto it = object.find(key);
        return it != object.end() && it->type() == type ? &*it : nullptr;
    };
    auto text_of = [&](const json& object, const char* key) {
        const json* v = member(object, key, json::value_t::string);
        return v ? v->get<std::string>() : std::string();
    };
    const json* choices = member(chunk, "choices", json::value_t::array);
    if (!choices || choices->empty()) return out;
    const json& choice = (*choices)[0];
    const json* delta = member(choice, "delta", json::value_t::object);
    static const json empty = json::object();
    const json& d = delta ? *delta : empty;
    if (const std::string r = text_of(d, "reasoning_content"); !r.empty()) text_delta(Kind::reasoning, r, out);
    if (const std::string c = text_of(d, "content"); !c.empty()) text_delta(Kind::message, c, out);
    if (const json* calls = member(d, "tool_calls", json::value_t::array)) {
        for (const json& call : *calls) {
            const json* i = member(call, "index", json::value_t::number_unsigned);
            if (!i) i = member(call, "index", json::value_t::number_integer);
            const int64_t index = i ? i->get<int64_t>() : 0;
            const json* fn = member(call, "function", json::value_t::object);
            const json& f = fn ? *fn : empty;
            if (const json* id = member(call, "id", json::value_t::string)) {  // a new call: id and name first
                close_item("completed", out);
                open_item(Kind::function_call,
                          {{"id", item_id("fc")}, {"type", "function_call"}, {"status", "in_progress"},
                           {"call_id", *id}, {"name", text_of(f, "name")}, {"arguments", ""}},
                          out);
                open_call_index_ = index;
            } else if (open_ != Kind::function_call || open_call_index_ != index) {
                continue;  // a fragment of a call that is not open: nothing to attach it to
            }
            const std::string args = text_of(f, "arguments");
            if (args.empty()) continue;
            text_ += args;
            const size_t out_index = output_.size() - 1;
            out.push_back(event("response.function_call_arguments.delta",
                                {{"item_id", output_[out_index]["id"]}, {"output_index", out_index}, {"delta", args}}));
        }
    }
    if (const json* f = member(choice, "finish_reason", json::value_t::string)) finish_reason_ = f->get<std::string>();
    return out;
}

std::vector<json> ResponsesStream::close(const json& chat_usage, const std::optional<std::string>& error) {
    std::vector<json> out;
    if (closed_) return out;
    closed_ = true;
    const bool cut = finish_reason_ == "length";
    close_item(cut || error ? "incomplete" : "completed", out);
    const int64_t in = chat_usage.value("prompt_tokens", int64_t(0)), gen = chat_usage.value("completion_tokens", int64_t(0));
    int64_t cached = 0;
    if (auto d = chat_usage.find("prompt_tokens_details"); d != chat_usage.end() && d->is_object())
        cached = d->value("cached_tokens", int64_t(0));
    usage_ = {{"input_tokens", in},
              {"input_tokens_details", {{"cached_tokens", cached}}},
              {"output_tokens", gen},
              {"total_tokens", in + gen}};
    const char* final_type = "response.completed";
    if (error) {
        status_ = "failed";
        error_ = {{"code", "server_error"}, {"message", *error}};
        final_type = "response.failed";
    } else if (cut) {
        status_ = "incomplete";
        final_type = "response.incomplete";
    } else {
        status_ = "completed";
    }
    out.push_back(event(final_type, {{"response", response()}}));
    return out;
}

json ResponsesStream::response() const {
    json r;
    r["id"] = ctx_.id;
    r["object"] = "response";
    r["created_at"] = ctx_.created_at;
    r["status"] = status_;
    r["background"] = false;
    r["error"] = error_;
    r["incomplete_details"] = status_ == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
    r["instructions"] = ctx_.instructions;
    r["max_output_tokens"] = ctx_.max_output_tokens;
    r["model"] = ctx_.model;
    r["output"] = output_;
    r["parallel_tool_calls"] = ctx_.parallel_tool_calls;
    r["previous_response_id"] = ctx_.previous_response_id;
    r["reasoning"] = {{"effort", nullptr}, {"summary", ctx_.reasoning_summary}};
    r["store"] = ctx_.store;
    r["temperature"] = ctx_.temperature;
    r["text"] = {{"format", ctx_.text_format}};
    r["tool_choice"] = ctx_.tool_choice;
    r["tools"] = ctx_.tools;
    r["top_p"] = ctx_.top_p;
    r["truncation"] = "disabled";
    r["usage"] = usage_;
    r["user"] = ctx_.user;
    r["metadata"] = ctx_.metadata.is_null() ? json::object() : ctx_.metadata;
    return r;
}

}  // namespace pagoda::server
