#include "backend/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace pagoda::backend {
namespace {

// ids[0..k) = the k largest of v[0..n), largest first; the strict > keeps the lower index on a tie.
// Selection sort: k is small (2-8).
template <class T>
void top_k(const T* v, int32_t n, int32_t k, int32_t* ids) {
    for (int32_t j = 0; j < k; ++j) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; ++e) {
            bool taken = false;
            for (int32_t i = 0; i < j; ++i) taken = taken || ids[i] == e;
            if (taken) continue;
            if (best < 0 || v[e] > v[best]) best = e;
        }
        ids[j] = best;
    }
}

}  // namespace

void check_routing(const MoeRouting& r, int32_t n_experts, int32_t k) {
    if (k < 1 || k > n_experts) fail("moe: {} experts used of {} is out of range", k, n_experts);
    if (!r.correction_bias.empty() && int64_t(r.correction_bias.size()) != n_experts)
        fail("moe: {} score-correction biases for {} experts", r.correction_bias.size(), n_experts);
    if (!(r.scale > 0) || !std::isfinite(r.scale)) fail("moe: the routed scaling factor {} must be positive", r.scale);
    if (!r.expert_scale.empty() && int64_t(r.expert_scale.size()) != n_experts)
        fail("moe: {} per-expert scales for {} experts", r.expert_scale.size(), n_experts);
    for (size_t e = 0; e < r.expert_scale.size(); ++e)
        if (!std::isfinite(r.expert_scale[e])) fail("moe: expert {}'s scale {} is not finite", e, r.expert_scale[e]);
    if (r.n_groups > 1) {
        if (n_experts % r.n_groups != 0)
            fail("moe: {} experts do not split into {} equal groups", n_experts, r.n_groups);
        if (r.n_groups_used < 1 || r.n_groups_used > r.n_groups)
            fail("moe: {} groups used of {} is out of range", r.n_groups_used, r.n_groups);
        if (n_experts / r.n_groups < 2) fail("moe: groups of {} expert score by their best two", n_experts / r.n_groups);
        if (int64_t(r.n_groups_used) * (n_experts / r.n_groups) < k)
            fail("moe: {} groups of {} experts hold fewer than the {} used", r.n_groups_used, n_experts / r.n_groups, k);
    }
}

void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, int32_t* ids, float* weights) {
    route_token(logits, n_experts, k, normalize, MoeRouting{}, ids, weights);
}

void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, const MoeRouting& r,
                 int32_t* ids, float* weights) {
    check_routing(r, n_experts, k);
    const bool plain = r.scoring == MoeScoring::softmax && r.correction_bias.empty() && r.n_groups <= 1;
    if (plain) {
        // Selection on the logits; the softmax over every expert in expert order. (This arithmetic is
        // the router's from before MoeRouting, bit for bit; it allocates nothing.)
        top_k(logits, n_experts, k, ids);
        const float max = logits[ids[0]];
        double sum = 0;
        for (int32_t e = 0; e < n_experts; ++e) sum += std::exp(double(logits[e]) - max);
        double picked = 0;
        for (int32_t j = 0; j < k; ++j) picked += std::exp(double(logits[ids[j]]) - max);
        const double denom = normalize ? picked : sum;
        for (int32_t j = 0; j < k; ++j)
            weights[j] = float(std::exp(double(logits[ids[j]]) - max) / denom * double(r.scale));
        if (!r.expert_scale.empty())
            for (int32_t j = 0; j < k; ++j) weights[j] *= r.expert_scale[size_t(ids[j])];
        return;
    }
    // Per-thread scratch, grown once: a step's routing allocates nothing after the first.
    thread_local std::vector<double> s, sel, group_score, w;
    thread_local std::vector<int32_t> kept;
    s.resize(size_t(n_experts));
    sel.resize(size_t(n_experts));
    switch (r.scoring) {
        case MoeScoring::softmax: {
            double max = logits[0];
            for (int32_t e = 1; e < n_experts; ++e) max = std::max(max, double(logits[e]));
            double sum = 0;
            for (int32_t e = 0; e < n_experts; ++e) sum += (s[size_t(e)] = std::exp(double(logits[e]) - max));
            for (auto& v : s) v /= sum;
            break;
        }
        case MoeScoring::sigmoid:
            for (int32_t e = 0; e < n_experts; ++e) s[size_t(e)] = 1 / (1 + std::exp(-double(logits[e])));
            break;
        case MoeScoring::softmax_selected:
            for (int32_t e = 0; e < n_experts; ++e) s[size_t(e)] = logits[e];
            break;
    }
    for (int32_t e = 0; e < n_experts; ++e)
        sel[size_t(e)] = s[size_t(e)] + (r.correction_bias.empty() ? 0.0 : double(r.correction_bias[size_t(e)]));
    if (r.n_groups > 1) {
        const int32_t per = n_experts / r.n_groups;
        group_score.resize(size_t(r.n_groups));
        for (int32_t g = 0; g < r.n_groups; ++g) {
            int32_t best2[2];
            top_k(sel.data() + size_t(g) * per, per, 2, best2);
            group_score[size_t(g)] = sel[size_t(g * per + best2[0])] + sel[size_t(g * per + best2[1])];
        }
        kept.resize(size_t(r.n_groups_used));
        top_k(group_score.data(), r.n_groups, r.n_groups_used, kept.data());
        for (int32_t g = 0; g < r.n_groups; ++g)
            if (std::find(kept.begin(), kept.end(), g) == kept.end())
                for (int32_t e = g * per; e < (g + 1) * per; ++e) sel[size_t(e)] = -std::numeric_limits<double>::infinity();
    }
    top_k(sel.data(), n_experts, k, ids);
    w.resize(size_t(k));
    for (int32_t j = 0; j < k; ++j) w[size_t(j)] = s[size_t(ids[j])];
    if (r.scoring == MoeScoring::softmax_selected) {
        double m = w[0];
        for (double v : w) m = std::max(m, v);
        double sum = 0;
        for (auto& v : w) sum += (v = std::exp(v - m));
        for (auto& v : w) v /= sum;
    }
    if (normalize) {
        double sum = 0;
        for (double v : w) sum += v;
        sum = std::max(sum, 6.103515625e-5);  // llama.cpp's clamp: the smallest normal f16
        for (auto& v : w) v /= sum;
    }
    for (int32_t j = 0; j < k; ++j)
        weights[j] = float(w[size_t(j)] * double(r.scale) * (r.expert_scale.empty() ? 1.0 : double(r.expert_scale[size_t(ids[j])])));
}

}  // namespace pagoda::backend
