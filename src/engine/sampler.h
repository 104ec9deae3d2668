// Picks the next token from a row of logits. Steps, in order: logit bias, repetition / frequency /
// presence penalties over the tokens seen so far, then greedy (temperature 0) or temperature →
// top-k → top-p (nucleus) → min-p → a draw from the renormalised distribution. Only the cuts need
// the candidates in order, and only as far as they reach: they are sorted lazily (a full sort of a
// 128k vocabulary took 20 ms a token).
//
// The draw is keyed: an inverse-CDF draw whose uniform is a counter-based hash of (seed, choice,
// position), the absolute index of the token in its sequence. So a sampled token is a function of
// its distribution, the seed, the choice and the position alone: it does not depend on what else
// was drawn before, which batch it was in, where a step ended, a preemption and recomputation,
// prefix-cache hits, or speculation. The sampler keeps no state between draws.
//
// Speculative verification is then exact: a drafted token d is accepted iff it is the token sample()
// draws at that position (at temperature 0: the argmax). A draft is accepted with probability p(d),
// as with rejection sampling, and the sampled text is the text without speculation, token for token.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace pagoda::engine {

struct SamplingParams {
    float temperature = 1.0f;     // 0: greedy
    int32_t top_k = 0;            // 0: off
    float top_p = 1.0f;           // 1: off
    float min_p = 0.0f;           // 0: off; keep tokens with p >= min_p * p_max
    float repetition_penalty = 1.0f;  // >1 discourages tokens already seen (divides positive logits)
    float frequency_penalty = 0.0f;   // subtracts count * penalty
    float presence_penalty = 0.0f;    // subtracts penalty once a token has appeared
    std::map<int32_t, float> logit_bias;
    std::optional<uint64_t> seed;     // unset: a random seed from the system's entropy (still keyed)

    void validate() const;  // throws pagoda::Error naming the first out-of-range field
};

// The keyed uniform in [0, 1) for (seed, choice, position): SplitMix64's finaliser chained over
// the three, 53 bits of the result.
double keyed_uniform(uint64_t seed, uint64_t choice, uint64_t position);

class Sampler {
public:
    // `choice`: the index of this choice among a request's n (each choice its own stream).
    explicit Sampler(SamplingParams params, uint64_t choice = 0);

    // `logits` is modified (bias, penalties, temperature). `history` is every token of the sequence so
    // far (prompt and generated), used by the penalties; `position` is the index in the sequence of
    // the token being drawn (the engine passes history.size()).
    int32_t sample(float* logits, int64_t vocab_size, const std::vector<int32_t>& history, int64_t position);

    const SamplingParams& params() const { return params_; }

    // A token with a finite logit: its logit over the temperature.
    struct Candidate {
        float logit;
        int32_t id;
    };

private:
    void apply_penalties(float* logits, int64_t vocab_size, const std::vector<int32_t>& history) const;
    // Bias, penalties; then (temperature > 0) the kept candidates_ (after a top-k, top-p or min-p
    // cut: best first; without one: all of them, in no particular order), each with its mass
    // probability(i) (softmax over the candidates top-k keeps, so they sum to kept_mass_ <= 1).
    // Returns false for greedy (or no finite logit): use the argmax.
    bool distribution(float* logits, int64_t vocab_size, const std::vector<int32_t>& history);
    // Puts the best n (or, unless exact, a chunk of at least n) candidates first, in order (those
    // before sorted_ are already).
    void sort_first(size_t n, bool exact = false);
    double probability(size_t i) const { return double(weights_[size_t(candidates_[i].id)]) * inv_sum_; }
    // The kept candidate at cumulative mass u * kept_mass_ (u in [0, 1)), in the candidates' order.
    int32_t draw(double u) const;

    SamplingParams params_;
    uint64_t seed_ = 0;
    uint64_t choice_ = 0;
    std::vector<Candidate> candidates_;
    std::vector<float> weights_;  // by token id: exp(logit - the largest), for the candidates
    size_t sorted_ = 0;     // candidates_[0 .. sorted_) are the best, in order
    double inv_sum_ = 0;    // 1 / the sum of every candidate's weight
    double kept_mass_ = 0;
};

}  // namespace pagoda::engine
