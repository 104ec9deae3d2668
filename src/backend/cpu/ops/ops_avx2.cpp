// AVX2 + FMA versions of the row operators (see ops.h for the contracts, ops_simd.h for the algorithms).
#include <immintrin.h>

#include "backend/cpu/ops/ops_paths.h"
#include "backend/cpu/ops/ops_simd.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx2Ops {
    using V = __m256;
    static constexpr int L = 8;
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V set1(float f) { return _mm256_set1_ps(f); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }
    static float hsum(V v) {
        __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
    }
    static float hmax(V v) {
        __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        q = _mm_max_ps(q, _mm_movehl_ps(q, q));
        return _mm_cvtss_f32(_mm_max_ss(q, _mm_movehdup_ps(q)));
    }
    static V dup_pairs(const float* p) {
        return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    }
    static V swap_pairs(V v) { return _mm256_permute_ps(v, 0xb1); }
    static V addsub_pairs(V a, V b) { return _mm256_addsub_ps(a, b); }
    // Same algorithm as the AVX-512 version (see ops_avx512.cpp).
    static V exp(V x) {
        const V tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33f), _CMP_LT_OQ);
        x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.37f));
        V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
        r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
        V p = _mm256_set1_ps(1.f / 5040);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        V res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        return _mm256_andnot_ps(tiny, res);
    }
};

}  // namespace

void rms_norm_avx2(const float* x, const float* w, int64_t n, float eps, float* out) { rms_norm_t<Avx2Ops>(x, w, n, eps, out); }
void silu_mul_avx2(const float* g, const float* u, int64_t n, float* out) { silu_mul_t<Avx2Ops>(g, u, n, out); }
void add_inplace_avx2(float* y, const float* x, int64_t n) { add_inplace_t<Avx2Ops>(y, x, n); }
void softmax_avx2(float* x, int64_t n) { softmax_t<Avx2Ops>(x, n); }
void rope_avx2(float* x, int64_t nh, int64_t hd, int64_t nr, const float* c, const float* s, bool neox) {
    rope_t<Avx2Ops>(x, nh, hd, nr, c, s, neox);
}
void exp_f32_avx2(const float* x, int64_t n, float* out) { exp_t<Avx2Ops>(x, n, out); }

}  // namespace pagoda::backend::cpu::detail
