// Internal: e^x for x <= 0 on 16 lanes, for the softmax of the AVX-512 attention walk
// (attention_avx512.cpp) and of the AMX attention method (amx_attention.h). Same construction and
// accuracy as the AVX2 path's (attention_avx2.cpp): Cody-Waite reduction by ln 2, a degree-6
// polynomial, the exponent built in integer lanes. Below -87.34 (and for -inf) the result is exactly
// zero, so a masked score contributes nothing; exp(0) is exactly 1. Static: each TU that includes it
// (only TUs compiled with the AVX-512 flags) keeps its own copy.
#pragma once
#include <immintrin.h>

namespace pagoda::backend::cpu::attention_detail {

static inline __m512 exp_nonpositive(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    __mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(e));
}

}  // namespace pagoda::backend::cpu::attention_detail
