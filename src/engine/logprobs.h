// Log-probabilities of a row of raw logits (log-softmax, computed in double): the chosen token's
// value and the `top` most likely tokens (ties broken by lower id; tokens at -inf, masked out by a
// grammar, are never alternatives), for OpenAI-style `logprobs`.
#pragma once
#include <cstdint>

#include "engine/request.h"

namespace pagoda::engine {

struct LogSoftmax {
    double max = 0, log_sum = 0;  // logprob(i) = logits[i] - max - log_sum
};
LogSoftmax log_softmax_of(const float* logits, int64_t vocab_size);

// `top` in 0..vocab_size. `chosen`'s logprob is filled in by the caller once it is known.
TokenLogprob top_logprobs(const float* logits, int64_t vocab_size, const LogSoftmax& norm, int32_t top);

}  // namespace pagoda::engine
