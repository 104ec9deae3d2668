// Internal: 16 blocks of 32 activations quantised at once for quantize_token_fused (int8_fused.h),
// each block's scalars (its max, scale, inverse and code sums) in one lane of a vector rather than a
// chain of scalar steps per block (that chain made the AVX2 loop ~70 cycles a block: 5 % of a
// quantised prefill step). The values are that loop's for finite inputs, so the AVX2 and AVX-512
// paths keep quantising alike:
//  - amax is exact in any order of maxima;
//  - scale = amax / 127 and inv = amax > 0 ? 127 / amax : 0 are the same IEEE divisions;
//  - q = clamp(round-half-even(x * inv), -127, 127): the same products and conversion (MXCSR);
//  - the half sums h0, h1 are exact integers; s = scale * f32(h0) + scale * f32(h1) and sh are the
//    same two products (and sum: no FMA contraction, -ffp-contract=off); corr = -offset * h.
// Include only from TUs compiled with AVX-512 F/BW/VL/DQ (int8_fused.h does so under those macros).
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/simd/avx512.h"

namespace pagoda::backend::cpu::detail {
namespace {

// Blocks b0 .. b0 + 15 of one token (x: their 512 values, q: their codes); d, s, sh, corr and sums are
// the token's arrays as quantize_token_fused takes them (indexed by absolute block; b0 % 16 == 0).
inline void quantize_blocks16_avx512(const float* x, int64_t b0, int offset, bool per_half, int8_t* q, float* d,
                                     float* s, float* sh, int32_t* corr, int32_t* sums) {
    __m512 a[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k)
        a[k] = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * k)), _mm512_abs_ps(_mm512_loadu_ps(x + 32 * k + 16)));
    const __m512 amax = simd::Avx512::lanes16<simd::MaxPs>(a);
    const __m512 c127 = _mm512_set1_ps(127.f);
    const __m512 scale = _mm512_div_ps(amax, c127);
    alignas(64) float inv[16];
    _mm512_store_ps(inv, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ), c127, amax));
    _mm512_storeu_ps(d + b0, scale);

    const __m512i hi_q = _mm512_set1_epi32(127), lo_q = _mm512_set1_epi32(-127);
    __m512 lo_i[16], hi_i[16];  // the codes as int32 (in float registers, bits as they are), for the sums
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
        const __m512 iv = _mm512_set1_ps(inv[k]);
        __m512i l = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * k), iv));  // MXCSR: nearest even
        __m512i h = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * k + 16), iv));
        l = _mm512_max_epi32(_mm512_min_epi32(l, hi_q), lo_q);
        h = _mm512_max_epi32(_mm512_min_epi32(h, hi_q), lo_q);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * k), _mm512_cvtepi32_epi8(l));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * k + 16), _mm512_cvtepi32_epi8(h));
        lo_i[k] = _mm512_castsi512_ps(l);
        hi_i[k] = _mm512_castsi512_ps(h);
    }
    const __m512i h0 = _mm512_castps_si512(simd::Avx512::lanes16<simd::AddEpi32>(lo_i));
    const __m512i h1 = _mm512_castps_si512(simd::Avx512::lanes16<simd::AddEpi32>(hi_i));

    if (sums) {
        alignas(64) int32_t s0[16], s1[16];
        _mm512_store_si512(s0, h0);
        _mm512_store_si512(s1, h1);
        for (int k = 0; k < 16; ++k) {
            sums[2 * (b0 + k)] = s0[k];
            sums[2 * (b0 + k) + 1] = s1[k];
        }
    }
    const __m512 t0 = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(h0)), t1 = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(h1));
    if (s) _mm512_storeu_ps(s + b0, _mm512_add_ps(t0, t1));
    // sh and corr: per group of 8 blocks, the first halves' 8 values, then the second halves'.
    const int64_t g = b0 / 8 * 16;
    if (sh) {
        _mm256_storeu_ps(sh + g, _mm512_castps512_ps256(t0));
        _mm256_storeu_ps(sh + g + 8, _mm512_castps512_ps256(t1));
        _mm256_storeu_ps(sh + g + 16, _mm512_extractf32x8_ps(t0, 1));
        _mm256_storeu_ps(sh + g + 24, _mm512_extractf32x8_ps(t1, 1));
    }
    if (offset) {
        const __m512i neg = _mm512_set1_epi32(-offset);
        if (per_half) {
            const __m512i c0 = _mm512_mullo_epi32(neg, h0), c1 = _mm512_mullo_epi32(neg, h1);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g), _mm512_castsi512_si256(c0));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g + 8), _mm512_castsi512_si256(c1));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g + 16), _mm512_extracti64x4_epi64(c0, 1));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g + 24), _mm512_extracti64x4_epi64(c1, 1));
        } else {  // one correction per block, in the first 8 of each group's 16 (the rest is not written)
            const __m512i c = _mm512_mullo_epi32(neg, _mm512_add_epi32(h0, h1));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g), _mm512_castsi512_si256(c));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + g + 16), _mm512_extracti64x4_epi64(c, 1));
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
