// Expert selection of a mixture-of-experts router (backend::MoeOp's contract, MoeRouting's
// formulas), in floats, for backends with f32 activations. Selection ties go to the lower expert
// index, so the choice is a function of the token's logits alone. Scores and weights are computed
// in double from the float logits, in expert order (a fixed order: each sum is the token's own).
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace pagoda::backend {

// ids[0..k) = the selected experts, best first; weights[j] their weights (MoeRouting). Throws when
// k is not in 1..n_experts, or the groups or the correction bias do not fit n_experts.
void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, const MoeRouting& routing,
                 int32_t* ids, float* weights);
// The plain softmax router (Mixtral, Qwen MoE): weights = softmax(logits) at the k largest logits,
// divided by the k weights' sum when `normalize`.
void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, int32_t* ids, float* weights);

// Throws naming the problem when `routing` cannot route n_experts experts k at a time.
void check_routing(const MoeRouting& routing, int32_t n_experts, int32_t k);

}  // namespace pagoda::backend
