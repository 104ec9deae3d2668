// What a caller hands the engine (Request) and what comes back while it runs (Delta).
// A request is a prompt (token ids), sampling parameters, stop conditions, a priority and the number
// of choices n; the engine streams one Delta per choice per generated token (and one when a choice
// ends), in order. Text in deltas is valid UTF-8 that never ends inside a character, and text that
// could still turn out to be the start of a stop string is held back until that is decided; a stop
// string and anything after it never appear in the output.
#pragma once
#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/clock.h"
#include "engine/pooling.h"
#include "engine/sampler.h"
#include "engine/thinking_budget.h"
#include "grammar/grammar.h"
#include "lora/adapter.h"

namespace pagoda::engine {

using RequestId = uint64_t;

// An image in a prompt: prompt positions [begin, begin + rows), whose ids are the model's image
// placeholder, take these embeddings (rows x the model's input_embedding_width(), already in its
// embedding space) instead of their tokens'. Gemma 3's soft tokens (no grid) attend to each other
// bidirectionally. For a model with M-RoPE (StepModelInfo::mrope: Qwen3-VL) the image carries its
// merged grid, rows = grid_h x grid_w row-major, and stays causal; every row of its sequence then
// gets rotary positions by model/mrope_position.h (the image's rows by the grid, text after it
// continuing from the image's start + max(grid_h, grid_w)). The engine computes an image in one step
// (a prompt chunk never splits it) and keys the prefix cache by the images' places, grids and
// content hashes, so a repeated image is served from the cache.
struct PromptImage {
    int64_t begin = 0, rows = 0;
    std::vector<float> embeddings;
    uint64_t hash = 0;  // of the image's content (vision::EncodedImage::hash)
    int64_t grid_h = 0, grid_w = 0;  // M-RoPE models: merged tokens per column and per row (0: none)
};

struct StopConditions {
    int64_t max_tokens = 16;              // generated tokens per choice (>= 1)
    bool ignore_eos = false;              // keep going past end-of-generation tokens
    // Until this many tokens are generated, end-of-generation tokens and stop_token_ids get
    // probability zero (unless a grammar allows nothing else) and stop strings do not stop.
    int64_t min_tokens = 0;
    std::vector<int32_t> stop_token_ids;  // finish (reason stop) when one is sampled; not in the text
    std::vector<std::string> stop;        // stop strings (need a tokenizer); excluded from the text
    bool include_stop_str = false;        // ... unless this is set: then the one that matched ends the text
};

struct Request {
    std::vector<int32_t> prompt;  // token ids, non-empty
    SamplingParams sampling;      // seed: choice i draws from its own keyed stream (seed, i, position)
    StopConditions stop;
    int32_t priority = 0;         // with the priority and fair policies: lower runs sooner, ties first-come
    // With the fair policy: whose share it counts against (an API key; 0: anonymous) and that
    // tenant's weight (> 0): backlogged tenants get tokens in proportion to their weights.
    uint32_t tenant = 0;
    double weight = 1;
    int32_t n = 1;                // choices sharing the prompt's KV
    int32_t logprobs = -1;        // -1: none; 0..20: the sampled token's logprob and this many alternatives
    // -1: none; 0..20: each prompt token's logprob after the first, its rank and this many
    // alternatives, on each choice's first delta (prompt_logprobs.h; the prompt is then computed
    // whole, without prefix-cache reuse).
    int32_t prompt_logprobs = -1;
    // Constrains every choice's output to the grammar's language (needs a tokenizer): tokens that
    // cannot continue it are masked before sampling, end-of-generation and stop_token_ids are allowed
    // only where the grammar may end, and a choice whose grammar admits nothing more finishes (stop).
    // Tokens are also held to what max_tokens and the context leave: an output that can be completed
    // in them always is (it may then end on max_tokens, but as a whole sentence).
    std::shared_ptr<const grammar::Grammar> grammar;
    // A reasoning block's token budget (thinking_budget.h): at the budget the engine forces the
    // closing tag (needs a tokenizer). With a grammar, the grammar should admit the block
    // (grammar/reasoning_prefix.h); where the grammar overrules a forced token, the grammar wins.
    std::optional<ThinkingBudget> thinking;
    // An embedding instead of a generation: the prompt is computed (every token, for mean and CLS
    // pooling: no prefix-cache reuse) and the request finishes with one delta carrying the pooled,
    // by default L2-normalised, final hidden state. n must be 1; sampling, stop and grammar unused.
    std::optional<EmbeddingSpec> embedding;
    // An encoder's embedding only: each prompt token's token type (segment) id, aligned with the
    // prompt (a cross-encoder's pair: 0 for the first text, 1 for the second); empty: all 0. Each must
    // be below the model's token types (StepModelInfo::n_token_types).
    std::vector<int32_t> token_types;
    // The latest time the request may start (be first scheduled). A request still waiting then is
    // never run: it finishes with FinishReason::error and error_code "deadline_exceeded".
    std::optional<Clock::time_point> start_deadline;
    // A scoring request instead of a generation (token_scores.h): the request finishes (stop) at
    // its prompt's end with one delta carrying the last position's logits of these ids. n must be 1.
    std::vector<int32_t> score_tokens;
    // Runs under this LoRA adapter (loaded by StepModel::load_lora) at its scale; empty: the base
    // model. Its prefix-cache blocks are keyed by it (never shared with another adapter's).
    lora::AdapterRef lora;
    // Images in the prompt, increasing and disjoint (the model must take image input, each image
    // at most SchedulerConfig::max_image_tokens rows). Not with embedding requests.
    std::vector<PromptImage> images;
};

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", "error"

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0;  // log-softmax of the model's logits (after the grammar mask, if any)
    int32_t rank = 0;   // prompt logprobs: the token's 1-based rank by logit (0: not computed)
    std::vector<std::pair<int32_t, float>> top;       // most likely alternatives, best first
};

struct Usage {
    int64_t prompt_tokens = 0;
    int64_t cached_prompt_tokens = 0;  // served from the prefix cache at first admission
    int64_t completion_tokens = 0;     // generated tokens of all choices so far
};

// Per-request latencies in seconds, filled in when the request is done.
struct RequestTimings {
    double queue = 0;    // arrival -> first scheduled
    double ttft = -1;    // arrival -> first token (-1: none produced)
    double e2e = 0;      // arrival -> done
    std::vector<double> inter_token;  // gaps between consecutive tokens of choice 0
};

struct Delta {
    RequestId request = 0;
    int32_t index = 0;                   // choice
    std::vector<int32_t> token_ids;      // new tokens (also those whose text is held back)
    std::string text;                    // new text
    std::vector<TokenLogprob> logprobs;  // one per new token when logprobs >= 0
    // With Request::prompt_logprobs, on each choice's first delta: one per prompt token from the
    // second on (the first has no context to be predicted from).
    std::vector<TokenLogprob> prompt_logprobs;
    std::optional<FinishReason> finish_reason;  // set on the choice's last delta
    std::string error;                   // with FinishReason::error
    std::string error_code;              // with FinishReason::error, when it has one: "deadline_exceeded"
    std::string stop_string;             // with FinishReason::stop: the stop string that ended the choice, if one did
    std::vector<float> embedding;        // an embedding request's result, on its last delta
    std::vector<float> token_logits;     // a scoring request's result (Request::score_tokens order)
    bool request_done = false;           // the request's last delta: every choice finished
    Usage usage;                         // counts so far
    RequestTimings timings;              // with request_done
};

}  // namespace pagoda::engine
