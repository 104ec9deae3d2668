// The element-wise maps of ops.h that have no SIMD version: scale and soft cap.
#include <cmath>

#include "backend/cpu/ops/ops.h"

namespace pagoda::backend::cpu {

void scale_inplace(float* x, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void softcap_inplace(float* x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace pagoda::backend::cpu
