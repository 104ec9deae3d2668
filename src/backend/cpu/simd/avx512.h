// Internal: the one AVX-512 traits type of the CPU kernels, simd::Avx512: 16 f32 lanes in a
// __m512 (AVX-512 F/BW/VL/DQ), each operation one fixed instruction sequence, so every kernel family
// written over it (ops_simd.h, float_gemm.h, kv_rows_simd.h) rounds the same way. Include only from
// *_avx512.cpp / *_amx.cpp files (their flags). Internal linkage: each ISA file compiles its own copy.
//   arithmetic  zero, set1, load, store, add, sub, mul, div, fma (c + a * b), fnma (c - a * b), max
//   reductions  hsum: (v[j] + v[j+8]), then (+ the lane 4 on), then lanes 0+2 / 1+3, then their sum
//               (the order of _mm512_reduce_add_ps); hmax: _mm512_reduce_max_ps
//   widening    load_f16, load_bf16 (bits << 16)
//               load_i8 (sign-extended int8 codes)
//   partial     load_n, load_f16_n, load_bf16_n, load_i8_n (the first n of L values, the rest zero,
//               or `fill` for load_n), store_n: masked (mask_n), nothing read or written past p + n;
//               first_n (lanes from n on zeroed)
//   exp         e^x and exp_nonpositive (x <= 0: the attention softmax, AMX attention too):
//               simd/exp_poly.h over min, round, pow2, zero_below, underflow (a NaN x gives 0)
//   lanes16     sixteen vectors reduced across their lanes at once by Op (AddPs, MaxPs, AddEpi32)
//   RoPE pairs  dup_pairs (each of 8 values twice), swap_pairs, addsub_pairs (even lanes a-b)
//   narrowing   any_nan, abs_max, to_f16, to_bf16 (f32_to_bf16's rounding, AVX-512 F only: the
//               AVX512_BF16 conversion is not specified to match it on every input), to_q8
#pragma once
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/simd/exp_poly.h"

namespace pagoda::backend::cpu::simd {
namespace {

// The combining operations of Avx512::lanes16.
struct AddPs {
    static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
};
struct MaxPs {
    static __m512 apply(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
};
struct AddEpi32 {  // int32 lanes held in float registers
    static __m512 apply(__m512 a, __m512 b) {
        return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
    }
};

struct Avx512 {
    using V = __m512;
    static constexpr int L = 16;

    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float f) { return _mm512_set1_ps(f); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }

    static float hsum(V v) {
        const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
        __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        q = _mm_add_ss(q, _mm_movehdup_ps(q));
        return _mm_cvtss_f32(q);
    }
    static float hmax(V v) { return _mm512_reduce_max_ps(v); }

    static V load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static V load_bf16(const uint16_t* p) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }

    static __mmask16 mask_n(int n) { return __mmask16((1u << n) - 1u); }  // n in 0..16
    static V load_i8(const int8_t* p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
    static V load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask_n(n), p); }
    static V load_n(const float* p, int n, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mask_n(n), p); }
    static V load_i8_n(const int8_t* p, int n) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask_n(n), p))); }
    static V first_n(V v, int n) { return _mm512_maskz_mov_ps(mask_n(n), v); }
    static void store_n(float* p, V v, int n) { _mm512_mask_storeu_ps(p, mask_n(n), v); }
    static V load_f16_n(const uint16_t* p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask_n(n), p)); }
    static V load_bf16_n(const uint16_t* p, int n) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask_n(n), p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }

    // e^x and e^x for x <= 0: simd/exp_poly.h, over these operations.
    static V exp(V x) { return exp_poly7<Avx512>(x); }
    static V exp_nonpositive(V x) { return exp_nonpositive_poly<Avx512>(x); }
    static V min(V a, V b) { return _mm512_min_ps(a, b); }
    static V round(V x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static V pow2(V n) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
    }
    static V zero_below(V v, V x, V lo) { return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), _mm512_setzero_ps()); }
    static V underflow(V v, V x, V lo) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), v); }  // NaN x: 0

    // Sixteen vectors reduced across their lanes at once: lane j of the result = Op over the 16 lanes
    // of a[j], always paired the same way (lanes 8 apart, then 4, 2, 1; each step combines two
    // vectors' halves into one, a transposing tree of 15 shuffle pairs). Used for the scores of 16
    // keys (Op = AddPs: each score's lane sums in this fixed order) and for 16 blocks' maxima and
    // code sums (int8_quantize_avx512.h; integer ops read the registers' bits).
    template <class Op>
    static V lanes16(const V* a) {
        __m512 b[8], c[4], e[2];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)  // lanes 8 apart; 256-bit halves: [a_k | a_k+8]
            b[k] = Op::apply(_mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k)  // lanes 4 apart; 128-bit quarters: [a_k, a_k+8, a_k+4, a_k+12]
            c[k] = Op::apply(_mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k)  // lanes 2 apart
            e[k] = Op::apply(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]))));
        // Lanes 1 apart; lane 4Q + {0, 1, 2, 3} then holds vector [0, 2, 1, 3][.] + {0, 8, 4, 12}[Q].
        const __m512 f = Op::apply(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
        const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
        return _mm512_permutexvar_ps(order, f);
    }

    static V dup_pairs(const float* p) {
        const __m512i idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_loadu_ps(p)));
    }
    static V swap_pairs(V v) { return _mm512_permute_ps(v, 0xb1); }
    static V addsub_pairs(V a, V b) { return _mm512_mask_sub_ps(_mm512_add_ps(a, b), 0x5555, a, b); }

    static bool any_nan(const float* x) {
        const __m512 v = _mm512_loadu_ps(x);
        return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0;
    }
    // acc = max(acc, |x|); whether |x| is finite in every lane (a NaN lane is caught here, whatever
    // max made of it).
    static bool abs_max(V& acc, V x) {
        const V a = _mm512_abs_ps(x);
        acc = _mm512_max_ps(acc, a);
        return _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.40282347e+38f), _CMP_LE_OQ) == 0xffff;
    }
    static void to_f16(const float* x, uint16_t* out) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // f32_to_bf16 on the bits: (u + 0x7fff + bit 16 of u) >> 16, NaN lanes (u >> 16) | 0x40.
    static void to_bf16(const float* x, uint16_t* out) {
        const __m512i u = _mm512_loadu_si512(x);
        const __m512i high = _mm512_srli_epi32(u, 16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        const __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), _mm512_and_si512(high, _mm512_set1_epi32(1))), 16);
        const __m512i h = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(h));
    }
    // 16 codes: x / scale rounded half to even, clamped to +-127.
    static void to_q8(const float* x, float scale, int8_t* out) {
        const V r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x), _mm512_set1_ps(scale)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const V c = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(c)));
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::simd
