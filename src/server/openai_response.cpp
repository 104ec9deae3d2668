#include "server/openai_response.h"

#include <fmt/format.h>

#include "server/prompt_logprobs_json.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {

using json = nlohmann::json;

const char* openai_finish_reason(engine::FinishReason reason) {
    switch (reason) {
        case engine::FinishReason::stop: return "stop";
        case engine::FinishReason::length: return "length";
        case engine::FinishReason::cancelled: return "abort";
        case engine::FinishReason::error: return "error";
    }
    return "stop";
}

ResponseAssembler::ResponseAssembler(ResponseContext context, size_t n_subs)
    : ctx_(std::move(context)), subs_(n_subs), choices_(n_subs * size_t(ctx_.n)) {
    for (size_t sub = 0; sub < n_subs; ++sub)
        for (int32_t i = 0; i < ctx_.n; ++i) {
            Choice& c = choices_[sub * ctx_.n + i];
            if (ctx_.logprobs >= 0) {
                c.logprobs = ctx_.endpoint == Endpoint::chat_completions
                                 ? json{{"content", json::array()}}
                                 : json{{"tokens", json::array()},
                                        {"token_logprobs", json::array()},
                                        {"top_logprobs", json::array()},
                                        {"text_offset", json::array()}};
            }
            if (sub < ctx_.echo_text.size()) c.text = ctx_.echo_text[sub];
            if (ctx_.endpoint == Endpoint::chat_completions && ctx_.split_reasoning) c.splitter.emplace(ctx_.reasoning_format, ctx_.reasoning_open);
            if (ctx_.endpoint == Endpoint::chat_completions && ctx_.tool_format) c.tool_parser.emplace(*ctx_.tool_format, ctx_.tools);
        }
}

json ResponseAssembler::chunk_base() const {
    json j;
    j["id"] = ctx_.id;
    j["object"] = ctx_.endpoint == Endpoint::chat_completions ? "chat.completion.chunk" : "text_completion";
    j["created"] = ctx_.created;
    j["model"] = ctx_.model;
    j["system_fingerprint"] = ctx_.system_fingerprint.empty() ? json(nullptr) : json(ctx_.system_fingerprint);
    return j;
}

std::vector<json> ResponseAssembler::opening_chunks() const {
    std::vector<json> out;
    for (size_t index = 0; index < choices_.size(); ++index) {
        json choice;
        choice["index"] = index;
        if (ctx_.endpoint == Endpoint::chat_completions) {
            choice["delta"] = {{"role", "assistant"}, {"content", ""}};
        } else {
            size_t sub = index / size_t(ctx_.n);
            if (sub >= ctx_.echo_text.size() || ctx_.echo_text[sub].empty()) continue;
            choice["text"] = ctx_.echo_text[sub];
        }
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = nullptr;
        json chunk = chunk_base();
        chunk["choices"] = json::array({choice});
        if (ctx_.include_usage) chunk["usage"] = nullptr;
        out.push_back(std::move(chunk));
    }
    return out;
}

json ResponseAssembler::logprobs_json(const Choice& choice, const std::vector<engine::TokenLogprob>& lps,
                                      size_t text_offset) const {
    auto piece = [&](int32_t id) { return token_piece(ctx_.tokenizer, id); };
    auto bytes = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(int(c));
        return b;
    };
    (void)choice;
    if (ctx_.endpoint == Endpoint::chat_completions) {
        json content = json::array();
        for (const auto& lp : lps) {
            std::string tok = piece(lp.token);
            json top = json::array();
            for (const auto& [id, l] : lp.top) {
                std::string t = piece(id);
                top.push_back({{"token", t}, {"logprob", l}, {"bytes", bytes(t)}});
            }
            content.push_back({{"token", tok}, {"logprob", lp.logprob}, {"bytes", bytes(tok)}, {"top_logprobs", top}});
        }
        return json{{"content", content}};
    }
    json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
    size_t offset = text_offset;
    for (const auto& lp : lps) {
        std::string tok = piece(lp.token);
        tokens.push_back(tok);
        token_lps.push_back(lp.logprob);
        json top = json::object();
        for (const auto& [id, l] : lp.top) top[piece(id)] = l;
        tops.push_back(top);
        offsets.push_back(offset);
        offset += tok.size();
    }
    return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// A choice that ended by itself after calling tools finishes with "tool_calls", as OpenAI's do.
std::string ResponseAssembler::finish_reason(const Choice& c) const {
    if (c.finish == engine::FinishReason::stop && !c.tool_calls.empty()) return "tool_calls";
    return c.finish ? openai_finish_reason(*c.finish) : "stop";
}

void ResponseAssembler::append_logprobs(Choice& choice, const json& part) const {
    for (auto it = part.begin(); it != part.end(); ++it)
        for (const auto& item : it.value()) choice.logprobs[it.key()].push_back(item);
}

bool ResponseAssembler::cancelled() const {
    return std::any_of(choices_.begin(), choices_.end(),
                       [](const Choice& c) { return c.finish == engine::FinishReason::cancelled; });
}

std::vector<json> ResponseAssembler::add(size_t sub, const engine::Delta& d) {
    std::vector<json> out;
    if (sub >= subs_.size() || d.index < 0 || d.index >= ctx_.n) return out;
    Sub& s = subs_[sub];
    s.usage = d.usage;
    const size_t index = sub * size_t(ctx_.n) + size_t(d.index);
    Choice& c = choices_[index];
    if (d.finish_reason == engine::FinishReason::error && !error_)
        error_ = d.error.empty() ? std::string("the engine failed this request") : d.error;

    json lp = nullptr, prompt_lp = nullptr;
    if (!c.started) {  // the choice's first delta carries the prompt's logprobs
        c.started = true;
        if (ctx_.echo_logprobs && sub < ctx_.first_prompt_token.size()) {
            lp = echoed_prompt_logprobs(ctx_.first_prompt_token[sub], d.prompt_logprobs, ctx_.tokenizer, c.text.size());
            append_logprobs(c, lp);
        }
        if (ctx_.prompt_logprobs >= 0) prompt_lp = c.prompt_logprobs = vllm_prompt_logprobs(d.prompt_logprobs, ctx_.tokenizer);
    }
    if (ctx_.logprobs >= 0 && !d.logprobs.empty()) {
        json part = logprobs_json(c, d.logprobs, c.text.size());
        append_logprobs(c, part);
        if (lp.is_null()) lp = std::move(part);
        else
            for (auto it = part.begin(); it != part.end(); ++it)
                for (auto& item : it.value()) lp[it.key()].push_back(std::move(item));
    }
    chat::ReasoningParts parts;
    if (c.splitter && !c.finish) {
        parts = c.splitter->feed(d.text);
        if (d.finish_reason) {
            chat::ReasoningParts rest = c.splitter->finish();
            parts.reasoning += rest.reasoning;
            parts.content += rest.content;
        }
    } else {
        parts.content = d.text;
    }
    // The chunk's pieces in output order: content, then the call deltas that followed it (a call's
    // arguments never interleave with content, but content may sit between calls).
    struct Segment {
        std::string content;
        json calls = json::array();
    };
    std::vector<Segment> segments(1);
    if (c.tool_parser && !c.finish) {
        chat::ToolCallParts tp = c.tool_parser->feed(parts.content);
        if (d.finish_reason) {
            chat::ToolCallParts rest = c.tool_parser->finish();
            for (auto& call : rest.calls) {
                call.content_offset += tp.content.size();
                tp.calls.push_back(std::move(call));
            }
            tp.content += rest.content;
        }
        size_t taken = 0;
        for (auto& call : tp.calls) {
            if (call.index >= c.tool_calls.size() + (call.name.empty() ? 0 : 1)) continue;  // a dropped call
            if (!ctx_.parallel_tool_calls && call.index > 0) continue;
            if (call.content_offset > taken) {
                if (!segments.back().calls.empty()) segments.emplace_back();
                segments.back().content += tp.content.substr(taken, call.content_offset - taken);
                taken = call.content_offset;
            }
            json piece;
            if (!call.name.empty()) {
                piece = {{"index", call.index},
                         {"id", fmt::format("call_{}_{}_{}", ctx_.id, index, call.index)},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
                c.tool_calls.push_back(piece);
            } else {
                json& whole = c.tool_calls[call.index]["function"]["arguments"];
                whole = whole.get<std::string>() + call.arguments;
                piece = {{"index", call.index}, {"function", {{"arguments", call.arguments}}}};
            }
            segments.back().calls.push_back(std::move(piece));
        }
        if (taken < tp.content.size()) {
            if (!segments.back().calls.empty()) segments.emplace_back();
            segments.back().content += tp.content.substr(taken);
        }
        parts.content = std::move(tp.content);
    } else {
        segments.back().content = parts.content;
    }
    c.text += parts.content;
    c.reasoning += parts.reasoning;
    if (d.finish_reason && !c.finish) c.finish = d.finish_reason;

    for (size_t k = 0; k < segments.size(); ++k) {
        const bool first = k == 0, last = k + 1 == segments.size();
        Segment& seg = segments[k];
        const bool worth_sending = !seg.content.empty() || !seg.calls.empty() || (first && !parts.reasoning.empty()) ||
                                   (first && (!lp.is_null() || !prompt_lp.is_null())) ||
                                   (last && d.finish_reason.has_value());
        if (!worth_sending) continue;
        json choice;
        choice["index"] = index;
        if (ctx_.endpoint == Endpoint::chat_completions) {
            json delta = json::object();
            if (first && !parts.reasoning.empty()) delta["reasoning_content"] = parts.reasoning;
            if (!seg.content.empty()) delta["content"] = std::move(seg.content);
            if (!seg.calls.empty()) delta["tool_calls"] = std::move(seg.calls);
            choice["delta"] = std::move(delta);
        } else {
            choice["text"] = d.text;
        }
        choice["logprobs"] = first ? lp : json(nullptr);
        choice["finish_reason"] = last && d.finish_reason ? json(finish_reason(c)) : json(nullptr);
        const bool chat = ctx_.endpoint == Endpoint::chat_completions;
        if (first && !prompt_lp.is_null() && !chat) choice["prompt_logprobs"] = prompt_lp;
        json chunk = chunk_base();
        if (first && !prompt_lp.is_null() && chat && index == 0) chunk["prompt_logprobs"] = prompt_lp;
        chunk["choices"] = json::array({choice});
        if (ctx_.include_usage) chunk["usage"] = nullptr;
        out.push_back(std::move(chunk));
    }
    if (d.request_done && !s.done) {
        s.done = true;
        ++subs_done_;
    }
    return out;
}

int64_t ResponseAssembler::prompt_tokens() const {
    int64_t t = 0;
    for (const auto& s : subs_) t += s.usage.prompt_tokens;
    return t;
}

int64_t ResponseAssembler::completion_tokens() const {
    int64_t t = 0;
    for (const auto& s : subs_) t += s.usage.completion_tokens;
    return t;
}

json ResponseAssembler::usage() const {
    int64_t cached = 0;
    for (const auto& s : subs_) cached += s.usage.cached_prompt_tokens;
    const int64_t prompt = prompt_tokens(), completion = completion_tokens();
    return json{{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json ResponseAssembler::usage_chunk() const {
    json chunk = chunk_base();
    chunk["choices"] = json::array();
    chunk["usage"] = usage();
    return chunk;
}

json ResponseAssembler::response() const {
    json r;
    r["id"] = ctx_.id;
    r["object"] = ctx_.endpoint == Endpoint::chat_completions ? "chat.completion" : "text_completion";
    r["created"] = ctx_.created;
    r["model"] = ctx_.model;
    r["system_fingerprint"] = ctx_.system_fingerprint.empty() ? json(nullptr) : json(ctx_.system_fingerprint);
    json choices = json::array();
    for (size_t index = 0; index < choices_.size(); ++index) {
        const Choice& c = choices_[index];
        json choice;
        choice["index"] = index;
        if (ctx_.endpoint == Endpoint::chat_completions) {
            const bool calls = !c.tool_calls.empty();
            choice["message"] = {{"role", "assistant"},
                                 {"content", calls && c.text.empty() ? json(nullptr) : json(c.text)},
                                 {"refusal", nullptr}};
            if (!c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
            if (calls) choice["message"]["tool_calls"] = c.tool_calls;
        } else
            choice["text"] = c.text;
        choice["logprobs"] = c.logprobs;
        choice["finish_reason"] = c.finish ? json(finish_reason(c)) : json(nullptr);
        if (ctx_.prompt_logprobs >= 0 && ctx_.endpoint != Endpoint::chat_completions)
            choice["prompt_logprobs"] = c.prompt_logprobs;
        choices.push_back(std::move(choice));
    }
    r["choices"] = std::move(choices);
    // vLLM's chat response holds them once, beside the choices.
    if (ctx_.prompt_logprobs >= 0 && ctx_.endpoint == Endpoint::chat_completions && !choices_.empty())
        r["prompt_logprobs"] = choices_[0].prompt_logprobs;
    r["usage"] = usage();
    return r;
}

}  // namespace pagoda::server
