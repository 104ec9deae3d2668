// AVX-512 versions of the row operators (see ops.h for the contracts, ops_simd.h for the algorithms).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "backend/cpu/ops/ops_paths.h"
#include "backend/cpu/ops/ops_simd.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx512Ops {
    using V = __m512;
    static constexpr int L = 16;
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V set1(float f) { return _mm512_set1_ps(f); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }
    static float hsum(V v) { return _mm512_reduce_add_ps(v); }
    static float hmax(V v) { return _mm512_reduce_max_ps(v); }
    static V dup_pairs(const float* p) {
        const __m512i idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_loadu_ps(p)));
    }
    static V swap_pairs(V v) { return _mm512_permute_ps(v, 0xb1); }
    static V addsub_pairs(V a, V b) { return _mm512_mask_sub_ps(_mm512_add_ps(a, b), 0x5555, a, b); }
    // e^x = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (two-part ln2), e^r by its degree-7
    // Taylor polynomial (|r| <= ln2/2: truncation error < 1e-9 relative).
    static V exp(V x) {
        const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_LT_OQ);
        x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33f)), _mm512_set1_ps(88.37f));
        V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
        r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
        V p = _mm512_set1_ps(1.f / 5040);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
        __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
        V res = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
        return _mm512_mask_mov_ps(res, tiny, _mm512_setzero_ps());
    }
};

}  // namespace

void rms_norm_avx512(const float* x, const float* w, int64_t n, float eps, float* out) { rms_norm_t<Avx512Ops>(x, w, n, eps, out); }
void silu_mul_avx512(const float* g, const float* u, int64_t n, float* out) { silu_mul_t<Avx512Ops>(g, u, n, out); }
void add_inplace_avx512(float* y, const float* x, int64_t n) { add_inplace_t<Avx512Ops>(y, x, n); }
void softmax_avx512(float* x, int64_t n) { softmax_t<Avx512Ops>(x, n); }
void rope_avx512(float* x, int64_t nh, int64_t hd, int64_t nr, const float* c, const float* s, bool neox) {
    rope_t<Avx512Ops>(x, nh, hd, nr, c, s, neox);
}
void exp_f32_avx512(const float* x, int64_t n, float* out) { exp_t<Avx512Ops>(x, n, out); }

}  // namespace pagoda::backend::cpu::detail
