// AVX2 + FMA versions of the row operators (see ops.h for the contracts, ops_simd.h for the
// algorithms, simd/avx2.h for the traits).
#include "backend/cpu/ops/ops_paths.h"
#include "backend/cpu/ops/ops_simd.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::detail {

using simd::Avx2;

void rms_norm_avx2(const float* x, const float* w, int64_t n, float eps, float* out) { rms_norm_t<Avx2>(x, w, n, eps, out); }
void silu_mul_avx2(const float* g, const float* u, int64_t n, float* out) { silu_mul_t<Avx2>(g, u, n, out); }
void add_inplace_avx2(float* y, const float* x, int64_t n) { add_inplace_t<Avx2>(y, x, n); }
void softmax_avx2(float* x, int64_t n) { softmax_t<Avx2>(x, n); }
void rope_avx2(float* x, int64_t nh, int64_t hd, int64_t nr, const float* c, const float* s, bool neox) {
    rope_t<Avx2>(x, nh, hd, nr, c, s, neox);
}
void exp_f32_avx2(const float* x, int64_t n, float* out) { exp_t<Avx2>(x, n, out); }

}  // namespace pagoda::backend::cpu::detail
