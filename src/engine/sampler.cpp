#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

Sampler::Sampler(SamplingParams params) : params_(std::move(params)) {
    params_.validate();
    rng_.seed(params_.seed ? *params_.seed : std::random_device{}());
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

bool Sampler::distribution(float* logits, int64_t vocab, const std::vector<int32_t>& history) {
    for (const auto& [id, bias] : params_.logit_bias)
        if (id >= 0 && id < vocab) logits[id] += bias;
    apply_penalties(logits, vocab, history);
    if (params_.temperature == 0.0f) return false;

    candidates_.clear();
    candidates_.reserve(size_t(vocab));
    for (int64_t i = 0; i < vocab; ++i)
        if (logits[i] > -std::numeric_limits<float>::infinity()) candidates_.push_back({logits[i] / params_.temperature, int32_t(i)});
    if (candidates_.empty()) return false;
    auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };

    size_t keep = candidates_.size();
    if (params_.top_k > 0 && size_t(params_.top_k) < keep) keep = size_t(params_.top_k);
    // Sorting only what top-k keeps; top-p/min-p need the kept prefix in descending order.
    std::partial_sort(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(keep), candidates_.end(), by_logit);
    candidates_.resize(keep);

    const float max_logit = candidates_[0].first;
    probs_.resize(keep);
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += probs_[i] = std::exp(double(candidates_[i].first - max_logit));
    for (auto& p : probs_) p /= sum;

    if (params_.top_p < 1.0f) {
        double cumulative = 0;
        size_t n = 0;
        while (n < keep) {
            cumulative += probs_[n++];
            if (cumulative >= params_.top_p) break;
        }
        keep = n;
    }
    if (params_.min_p > 0.0f) {
        const double threshold = params_.min_p * probs_[0];
        size_t n = 1;
        while (n < keep && probs_[n] >= threshold) ++n;
        keep = n;
    }
    candidates_.resize(keep);
    probs_.resize(keep);
    kept_mass_ = 0;
    for (double p : probs_) kept_mass_ += p;
    return true;
}

// A draw from probs_ (masses summing to kept_mass_) without `excluded` (-1: none); `total` is
// the mass that remains.
int32_t Sampler::draw(double total, int32_t excluded) {
    double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
    int32_t last = -1;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        if (candidates_[i].second == excluded) continue;
        last = candidates_[i].second;
        r -= probs_[i];
        if (r < 0) return last;
    }
    return last;
}

int32_t Sampler::sample(float* logits, int64_t vocab, const std::vector<int32_t>& history) {
    if (!distribution(logits, vocab, history)) return int32_t(std::max_element(logits, logits + vocab) - logits);
    return draw(kept_mass_, -1);
}

int32_t Sampler::sample_or_accept(float* logits, int64_t vocab, const std::vector<int32_t>& history, int32_t draft) {
    if (!distribution(logits, vocab, history)) return int32_t(std::max_element(logits, logits + vocab) - logits);
    double mass = 0;  // of the draft, within kept_mass_
    for (size_t i = 0; i < candidates_.size(); ++i)
        if (candidates_[i].second == draft) mass = probs_[i];
    if (mass > 0 && std::uniform_real_distribution<double>(0.0, kept_mass_)(rng_) < mass) return draft;
    if (candidates_.size() == 1 && mass > 0) return draft;  // nothing else is possible
    return draw(kept_mass_ - mass, draft);
}

}  // namespace pagoda::engine
