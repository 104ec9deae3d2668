// Top-k expert selection of a mixture-of-experts router (backend::MoeOp's contract), in floats, for
// backends with f32 activations. Selection is by router logit (the softmax is monotonic, and logits
// carry no rounding of exp that could tie two experts); equal logits go to the lower expert index,
// so the choice is a function of the token's logits alone.
#pragma once
#include <cstdint>

namespace pagoda::backend {

// ids[0..k) = the selected experts, largest logit first; weights[j] = softmax(logits)[ids[j]],
// divided by the k weights' sum when `normalize`. Throws when k is not in 1..n_experts.
void route_token(const float* logits, int32_t n_experts, int32_t k, bool normalize, int32_t* ids, float* weights);

}  // namespace pagoda::backend
