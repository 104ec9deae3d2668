// Internal: per-ISA versions of the operators in ops.h (same contracts); call only when
// pagoda::active_isa() allows the ISA.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu {
void exp_f32_reference(const float* x, int64_t n, float* out);
}

namespace pagoda::backend::cpu::detail {

#define PAGODA_OPS_DECLARE(suffix)                                                                            \
    void rms_norm_##suffix(const float* x, const float* weight, int64_t n, float eps, float* out);            \
    void silu_mul_##suffix(const float* gate, const float* up, int64_t n, float* out);                         \
    void add_inplace_##suffix(float* y, const float* x, int64_t n);                                            \
    void softmax_##suffix(float* x, int64_t n);                                                                \
    void rope_##suffix(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos,          \
                       const float* sin, bool neox);                                                           \
    void exp_f32_##suffix(const float* x, int64_t n, float* out);

PAGODA_OPS_DECLARE(avx2)
PAGODA_OPS_DECLARE(avx512)
#undef PAGODA_OPS_DECLARE

}  // namespace pagoda::backend::cpu::detail
