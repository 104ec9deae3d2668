// Picks the next token from a row of logits. Steps, in order: logit bias, repetition / frequency /
// presence penalties over the tokens seen so far, then greedy (temperature 0) or temperature →
// top-k → top-p (nucleus) → min-p → a draw from the renormalised distribution with the sampler's
// own seeded generator, so a given seed always reproduces the same choices. Only the cuts need the
// candidates in order, and only as far as they reach: they are sorted lazily (a full sort of a
// 128k vocabulary took 20 ms a token).
//
// Speculative verification (sample_or_accept) draws from the same distribution while checking a
// drafted token d: greedy accepts d when it is the argmax; otherwise d is accepted with probability
// p(d) and, when refused, the token is drawn from p with d removed (renormalised). For a draft that is
// a fixed proposal this leaves every token's probability exactly p(x), so speculation never changes
// what is sampled in distribution, and at temperature 0 never changes it at all.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <random>
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
    std::optional<uint64_t> seed;     // unset: seeded from the system's entropy

    void validate() const;  // throws pagoda::Error naming the first out-of-range field
};

class Sampler {
public:
    explicit Sampler(SamplingParams params);

    // `logits` is modified (bias, penalties, temperature). `history` is every token of the sequence so
    // far (prompt and generated), used by the penalties.
    int32_t sample(float* logits, int64_t vocab_size, const std::vector<int32_t>& history);
    // As sample(), verifying the drafted token `draft`: returns draft when accepted, else the
    // replacement (never draft).
    int32_t sample_or_accept(float* logits, int64_t vocab_size, const std::vector<int32_t>& history, int32_t draft);

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
    int32_t draw(double total, int32_t excluded);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> candidates_;
    std::vector<float> weights_;  // by token id: exp(logit - the largest), for the candidates
    size_t sorted_ = 0;     // candidates_[0 .. sorted_) are the best, in order
    double inv_sum_ = 0;    // 1 / the sum of every candidate's weight
    double kept_mass_ = 0;
};

}  // namespace pagoda::engine
