// OpenAI /v1/completions bodies <-> engine requests, shared by `pagoda batch` and the HTTP server.
// parse_completion_request() checks every known field's type and range and throws pagoda::Error
// naming the field; unknown fields are ignored (clients send extras such as "user"). Accepted:
// prompt (string, token-id array, or a one-element array of either), max_tokens, temperature, top_p,
// top_k, min_p, seed, stop (string or array), n, logprobs (0..20), presence_penalty,
// frequency_penalty, repetition_penalty, logit_bias ({"id": bias}), priority, ignore_eos,
// stop_token_ids, stream, custom_id, model. CompletionAccumulator gathers deltas into the choices
// of a response; completion_response() renders the response object.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

struct CompletionRequest {
    Request request;
    std::string model;
    std::optional<std::string> custom_id;
    bool stream = false;
};

// `tokenizer` encodes string prompts (null: only token-id prompts are accepted).
CompletionRequest parse_completion_request(const nlohmann::json& body, const tokenizer::Tokenizer* tokenizer);

struct CompletionChoice {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenLogprob> logprobs;
    std::optional<FinishReason> finish;
    std::string error;
};

class CompletionAccumulator {
public:
    explicit CompletionAccumulator(int32_t n = 1) : choices_(size_t(n)) {}
    void add(const Delta& delta);
    bool done() const { return done_; }
    const std::vector<CompletionChoice>& choices() const { return choices_; }
    const Usage& usage() const { return usage_; }
    const RequestTimings& timings() const { return timings_; }
    // The first error of any choice ("" if none).
    std::string error() const;

private:
    std::vector<CompletionChoice> choices_;
    Usage usage_;
    RequestTimings timings_;
    bool done_ = false;
};

// {id, object: "text_completion", created, model, choices[{index, text, finish_reason, logprobs}],
//  usage{prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details{cached_tokens}}}.
// logprobs is null unless `logprobs` >= 0, then {tokens, token_logprobs, top_logprobs, text_offset}.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const CompletionAccumulator& result, int32_t logprobs,
                                   const tokenizer::Tokenizer* tokenizer);

// {"error": {"message", "type": "invalid_request_error", "code"?}} for a request that failed.
nlohmann::json completion_error(const std::string& message, const std::string& type = "invalid_request_error");

}  // namespace pagoda::engine
