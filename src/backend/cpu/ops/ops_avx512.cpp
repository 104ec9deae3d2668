// AVX-512 versions of the row operators (see ops.h for the contracts, ops_simd.h for the
// algorithms, simd/avx512.h for the traits).
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/ops/ops_paths.h"
#include "backend/cpu/ops/ops_simd.h"

namespace pagoda::backend::cpu::detail {

using simd::Avx512;

void rms_norm_avx512(const float* x, const float* w, int64_t n, float eps, float* out) { rms_norm_t<Avx512>(x, w, n, eps, out); }
void silu_mul_avx512(const float* g, const float* u, int64_t n, float* out) { silu_mul_t<Avx512>(g, u, n, out); }
void add_inplace_avx512(float* y, const float* x, int64_t n) { add_inplace_t<Avx512>(y, x, n); }
void softmax_avx512(float* x, int64_t n) { softmax_t<Avx512>(x, n); }
void rope_avx512(float* x, int64_t nh, int64_t hd, int64_t nr, const float* c, const float* s, bool neox) {
    rope_t<Avx512>(x, nh, hd, nr, c, s, neox);
}
void exp_f32_avx512(const float* x, int64_t n, float* out) { exp_t<Avx512>(x, n, out); }

}  // namespace pagoda::backend::cpu::detail
