// Scoring requests: instead of sampling, a request with Request::score_tokens finishes at the end
// of its prompt with the last position's raw logits of those token ids (Delta::token_logits, in the
// order asked). A decoder reranker reads its relevance this way (sigmoid(logit(yes) - logit(no))):
// every document is one such request, batched with whatever else the engine runs. Only the prompt
// is computed: nothing is generated, so no sampling, grammar, stop condition or logprobs apply, and
// the prefix cache is reused as for a generation (the last position is always computed).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace pagoda::engine {

// Whether `request` is a scoring request.
inline bool scores_tokens(const Request& request) { return !request.score_tokens.empty(); }

// Throws pagoda::Error for a scoring request the engine cannot serve (ids outside the vocabulary,
// n other than 1, a grammar or logprobs, a prompt over `context_limit`). No-op for others.
void validate_scoring(const Request& request, int64_t vocab_size, int64_t context_limit);

// The chosen logits of `row` (the vocabulary's logits at the prompt's last position).
std::vector<float> chosen_logits(const Request& request, const float* row);

// sigmoid(yes - no), computed as softmax over {yes, no} so it neither overflows nor loses the
// small side: the probability of "yes" when only the two answers are allowed.
double yes_probability(float yes_logit, float no_logit);

}  // namespace pagoda::engine
