#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_map>

#include "core/error.h"

namespace pagoda::engine {

void SamplingParams::validate() const {
    if (!(temperature >= 0 && temperature <= 100)) fail("temperature {} is out of range [0, 100]", temperature);
    if (top_k < 0) fail("top_k {} must not be negative", top_k);
    if (!(top_p > 0 && top_p <= 1)) fail("top_p {} is out of range (0, 1]", top_p);
    if (!(min_p >= 0 && min_p <= 1)) fail("min_p {} is out of range [0, 1]", min_p);
    if (!(repetition_penalty > 0 && repetition_penalty <= 10))
        fail("repetition_penalty {} is out of range (0, 10]", repetition_penalty);
    if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
        fail("frequency_penalty {} is out of range [-2, 2]", frequency_penalty);
    if (!(presence_penalty >= -2 && presence_penalty <= 2))
        fail("presence_penalty {} is out of range [-2, 2]", presence_penalty);
    for (const auto& [id, bias] : logit_bias)
        if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity())
            fail("logit bias for token {} must be a number or -inf (a ban)", id);
}

namespace {

uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t random_seed() {
    std::random_device device;
    return (uint64_t(device()) << 32) ^ uint64_t(device());
}

}  // namespace

double keyed_uniform(uint64_t seed, uint64_t choice, uint64_t position) {
    // Each input goes through a full avalanche before the next is mixed in, so neighbouring seeds,
    // choices and positions give unrelated draws (seed s choice 1 is not seed s+1 choice 0).
    const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ choice) ^ position);
    return double(h >> 11) * 0x1.0p-53;
}

Sampler::Sampler(SamplingParams params, uint64_t choice) : params_(std::move(params)), choice_(choice) {
    params_.validate();
    seed_ = params_.seed ? *params_.seed : random_seed();
}

void Sampler::apply_penalties(float* logits, int64_t vocab, const std::vector<int32_t>& history) const {
    const auto& p = params_;
    if (p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history)
        if (t >= 0 && t < vocab) ++counts[t];
    for (const auto& [t, n] : counts) {
        float& l = logits[t];
        if (p.repetition_penalty != 1.0f) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        l -= float(n) * p.frequency_penalty + p.presence_penalty;
    }
}

namespace {

// Best first: the higher logit, then the lower token id (a function object, so the sorts inline it).
struct Before {
    bool operator()(const Sampler::Candidate& a, const Sampler::Candidate& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};
constexpr Before before;

}  // namespace

void Sampler::sort_first(size_t n, bool exact) {
    n = std::min(n, candidates_.size());
    if (n <= sorted_) return;
    // A walk sorts whole chunks, doubling, so that one that goes deep sorts O(V log V) in all.
    if (!exact) n = std::min(candidates_.size(), std::max({n, 2 * sorted_, size_t(64)}));
    const auto first = candidates_.begin() + std::ptrdiff_t(sorted_), mid = candidates_.begin() + std::ptrdiff_t(n);
    if (16 * (n - sorted_) < candidates_.size() - sorted_) {
        // A heap of the chunk: most candidates fail one comparison with its top.
        std::partial_sort(first, mid, candidates_.end(), before);
    } else {
        if (mid != candidates_.end()) std::nth_element(first, mid - 1, candidates_.end(), before);
        std::sort(first, mid, before);
    }
    sorted_ = n;
}

bool Sampler::distribution(float* logits, int64_t vocab, const std::vector<int32_t>& history) {
    for (const auto& [id, bias] : params_.logit_bias)
        if (id >= 0 && id < vocab) logits[id] += bias;
    apply_penalties(logits, vocab, history);
    if (params_.temperature == 0.0f) return false;

    candidates_.clear();
    candidates_.reserve(size_t(vocab));
    for (int64_t i = 0; i < vocab; ++i)
        if (logits[i] > -std::numeric_limits<float>::infinity())
            candidates_.push_back({logits[i] / params_.temperature, int32_t(i)});
    if (candidates_.empty()) return false;
    // The largest scaled logit, over 8 running maxima (one chain of dependent compares would cost
    // 4 cycles a token).
    float lanes[8];
    std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
    const size_t n_cand = candidates_.size();
    for (size_t i = 0; i + 8 <= n_cand; i += 8)
        for (int k = 0; k < 8; ++k) lanes[k] = std::max(lanes[k], candidates_[i + size_t(k)].logit);
    for (size_t i = n_cand / 8 * 8; i < n_cand; ++i) lanes[0] = std::max(lanes[0], candidates_[i].logit);
    const float max_logit = *std::max_element(std::begin(lanes), std::end(lanes));
    sorted_ = 0;
    // The cuts walk the candidates best first, sorting only as far as they go (a full sort of a
    // 32k-128k vocabulary cost 4-20 ms a token, more than a decode step).
    if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
        sort_first(size_t(params_.top_k), true);
        candidates_.resize(size_t(params_.top_k));
    }
    // Softmax over what top-k keeps, the weights summed in the candidates' order (kept by token id,
    // so that the lazy sorts below move 8-byte candidates only).
    weights_.resize(size_t(vocab));
    double sum = 0;
    for (const Candidate& c : candidates_) sum += weights_[size_t(c.id)] = std::exp(c.logit - max_logit);
    inv_sum_ = 1.0 / sum;

    size_t keep = candidates_.size();
    if (params_.top_p < 1.0f) {
        double cumulative = 0;
        size_t n = 0;
        while (n < keep) {
            sort_first(n + 1);
            cumulative += probability(n++);
            if (cumulative >= params_.top_p) break;
        }
        keep = n;
    }
    if (params_.min_p > 0.0f) {
        sort_first(1);
        const double threshold = params_.min_p * probability(0);
        size_t n = 1;
        while (n < keep) {
            sort_first(n + 1);
            if (probability(n) < threshold) break;
            ++n;
        }
        keep = n;
    }
    // What is kept: a sorted prefix after a cut, else every candidate in the order they are in.
    candidates_.resize(keep);
    kept_mass_ = 0;
    for (size_t i = 0; i < keep; ++i) kept_mass_ += probability(i);
    return true;
}

// Inverse CDF over the kept candidates in their order (a fixed function of the logits: id order
// without a cut, best first after one), so the same distribution and uniform give the same token.
int32_t Sampler::draw(double u) const {
    double r = u * kept_mass_;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        r -= probability(i);
        if (r < 0) return candidates_[i].id;
    }
    return candidates_.back().id;  // rounding left a sliver past the last
}

int32_t Sampler::sample(float* logits, int64_t vocab, const std::vector<int32_t>& history, int64_t position) {
    if (!distribution(logits, vocab, history)) return int32_t(std::max_element(logits, logits + vocab) - logits);
    return draw(keyed_uniform(seed_, choice_, uint64_t(position)));
}

}  // namespace pagoda::engine
