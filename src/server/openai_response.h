// Turns the engine's deltas for one API request into OpenAI response objects: streaming chunks
// (text_completion / chat.completion.chunk) as deltas arrive, and the whole response object
// (text_completion / chat.completion) at the end. Chat output may be split into reasoning_content
// and content (ResponseContext::split_reasoning); the chunks' pieces concatenate exactly to the
// final message's fields. A request with several prompts runs as several
// engine requests ("subs"); sub k's choice i is choice k*n + i. Not thread-safe: one owner feeds it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "engine/request.h"
#include "server/openai_request.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::server {

struct ResponseContext {
    Endpoint endpoint = Endpoint::completions;
    std::string id;       // "cmpl-..." / "chatcmpl-..."
    int64_t created = 0;  // unix seconds
    std::string model;
    std::string system_fingerprint;  // empty: null
    int32_t n = 1;
    int32_t logprobs = -1;
    bool include_usage = false;          // streaming: usage: null on chunks, a usage chunk at the end
    std::vector<std::string> echo_text;  // completions with echo: per prompt, the text to prepend
    // Prompt logprobs (prompt_logprobs_json.h), from each choice's first delta: with echo and
    // logprobs, the legacy logprobs start with the prompt's tokens; with vLLM's prompt_logprobs
    // (>= 0) a completions choice, or a chat response, carries `prompt_logprobs` (streamed: on the
    // choice's first chunk).
    bool echo_logprobs = false;
    int32_t prompt_logprobs = -1;
    std::vector<int32_t> first_prompt_token;  // per prompt
    const tokenizer::Tokenizer* tokenizer = nullptr;  // token strings for logprobs
    // Chat: <think>…</think> goes to reasoning_content (chat/reasoning.h), starting inside the
    // reasoning when the rendered prompt already opened it.
    // harmony (gpt-oss): the analysis channel is the reasoning, other messages the content, calls
    // re-written for the tool-call parser (chat/harmony.h).
    bool split_reasoning = false;
    bool reasoning_open = false;
    chat::ReasoningFormat reasoning_format = chat::ReasoningFormat::deepseek;
    // Chat with tools: the content (after reasoning) is parsed for tool calls in this format
    // (`tools`, the request's array, types Qwen3-Coder values). A call streams as OpenAI's do: a
    // tool_calls delta {index, id, type, function {name, arguments: "" or the first piece}} once its
    // name is known, then {index, function {arguments: piece}} as the arguments are generated; the
    // pieces concatenate to the final message's arguments. Content that the output has between
    // calls goes in its own chunk, in order. The choice finishes with "tool_calls". Without
    // parallel_tool_calls only the first call is kept.
    std::optional<chat::ToolCallFormat> tool_format;
    nlohmann::json tools;
    bool parallel_tool_calls = true;
};

// "stop", "length", "abort" (cancelled), "error".
const char* openai_finish_reason(engine::FinishReason reason);

class ResponseAssembler {
public:
    ResponseAssembler(ResponseContext context, size_t n_subs);

    // Streaming: chunks to send before any token (chat: the assistant role; completions: echoed prompt).
    std::vector<nlohmann::json> opening_chunks() const;
    // Records a delta of sub-request `sub`; returns the chunks it produces (may be none).
    std::vector<nlohmann::json> add(size_t sub, const engine::Delta& delta);

    bool done() const { return subs_done_ == subs_.size(); }
    // The first engine error reported (a choice finished with FinishReason::error), if any.
    const std::optional<std::string>& error() const { return error_; }
    // Whether a choice finished because the request was cancelled.
    bool cancelled() const;

    nlohmann::json usage() const;        // summed over subs
    nlohmann::json usage_chunk() const;  // streaming: choices [] and usage
    nlohmann::json response() const;     // non-streaming response object
    int64_t prompt_tokens() const;
    int64_t completion_tokens() const;
    const ResponseContext& context() const { return ctx_; }

private:
    struct Choice {
        std::string text;
        std::string reasoning;                          // chat with split_reasoning
        std::optional<chat::ReasoningSplitter> splitter;
        std::optional<chat::ToolCallParser> tool_parser;
        nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI tool_calls objects
        nlohmann::json logprobs;  // accumulated (null when not requested)
        nlohmann::json prompt_logprobs;  // vLLM's, from the first delta (null when not requested)
        bool started = false;            // a delta has arrived
        std::optional<engine::FinishReason> finish;
    };
    struct Sub {
        engine::Usage usage;
        bool done = false;
    };
    nlohmann::json chunk_base() const;
    nlohmann::json logprobs_json(const Choice& choice, const std::vector<engine::TokenLogprob>& lps,
                                 size_t text_offset) const;
    void append_logprobs(Choice& choice, const nlohmann::json& part) const;
    std::string finish_reason(const Choice& choice) const;

    ResponseContext ctx_;
    std::vector<Sub> subs_;
    std::vector<Choice> choices_;
    size_t subs_done_ = 0;
    std::optional<std::string> error_;
};

}  // namespace pagoda::server
