#include "engine/token_scores.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::engine {

void validate_scoring(const Request& req, int64_t vocab_size, int64_t context_limit) {
    if (!scores_tokens(req)) return;
    if (req.embedding) fail("a request either embeds or scores tokens, not both");
    for (int32_t id : req.score_tokens)
        if (id < 0 || id >= vocab_size)
            fail("score token id {} is out of range (vocabulary has {} tokens)", id, vocab_size);
    if (req.n != 1) fail("a scoring request has one result; n must be 1, got {}", req.n);
    if (req.grammar) fail("a scoring request generates nothing, so it takes no grammar");
    if (req.logprobs != -1) fail("a scoring request generates nothing, so it has no logprobs");
    if (int64_t(req.prompt.size()) > context_limit)
        fail("the input has {} tokens, more than the {} that fit", req.prompt.size(), context_limit);
}

std::vector<float> chosen_logits(const Request& req, const float* row) {
    std::vector<float> out;
    out.reserve(req.score_tokens.size());
    for (int32_t id : req.score_tokens) out.push_back(row[id]);
    return out;
}

double yes_probability(float yes_logit, float no_logit) {
    const double d = double(yes_logit) - double(no_logit);
    // 1 / (1 + e^-d) for d >= 0, e^d / (1 + e^d) below: the exponent is never positive.
    if (d >= 0) return 1.0 / (1.0 + std::exp(-d));
    const double e = std::exp(d);
    return e / (1.0 + e);
}

}  // namespace pagoda::engine
