#include "backend/moe_routing.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::backend {

void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, int32_t* ids, float* weights) {
    if (k < 1 || k > n_experts) fail("moe: {} experts used of {} is out of range", k, n_experts);
    // Selection sort over k: k is small (2-8), and the strict > keeps the lower index on a tie.
    for (int32_t j = 0; j < k; ++j) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_experts; ++e) {
            bool taken = false;
            for (int32_t i = 0; i < j; ++i) taken = taken || ids[i] == e;
            if (taken) continue;
            if (best < 0 || logits[e] > logits[best]) best = e;
        }
        ids[j] = best;
    }
    // Softmax over every expert, in expert order (a fixed order: the sum is the token's own).
    const float max = logits[ids[0]];
    double sum = 0;
    for (int32_t e = 0; e < n_experts; ++e) sum += std::exp(double(logits[e]) - max);
    double picked = 0;
    for (int32_t j = 0; j < k; ++j) picked += std::exp(double(logits[ids[j]]) - max);
    const double denom = normalize ? picked : sum;
    for (int32_t j = 0; j < k; ++j) weights[j] = float(std::exp(double(logits[ids[j]]) - max) / denom);
}

}  // namespace pagoda::backend
