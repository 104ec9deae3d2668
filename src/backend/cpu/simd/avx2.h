// Internal: the one AVX2 (+ FMA + F16C) traits type of the CPU kernels, simd::Avx2: 8 f32 lanes in
// a __m256, each operation one fixed instruction sequence, so every kernel family written over it
// (ops_simd.h, float_gemm.h, kv_rows_simd.h) rounds the same way. Include only from *_avx2.cpp /
// *_avx512.cpp files (their flags). Internal linkage: each ISA file compiles its own copy under its
// own flags (a shared inline copy could be the one built for AVX-512).
//   arithmetic  zero, set1, load, store, add, sub, mul, div, fma (c + a * b), fnma (c - a * b), max
//   reductions  hsum: (v[j] + v[j+4]), then lanes 0+2 / 1+3, then their sum; hmax the same tree
//   widening    load_f16 (F16C), load_bf16 (bits << 16)
//               load_i8 (sign-extended int8 codes)
//   partial     load_n, load_f16_n, load_bf16_n, load_i8_n (the first n of L values, the rest zero,
//               or `fill` for load_n), store_n: through a buffer, nothing read or written past p + n;
//               first_n (lanes from n on zeroed)
//   exp         e^x and exp_nonpositive (x <= 0, the attention softmax): simd/exp_poly.h over
//               min, round, pow2, zero_below, underflow (a NaN x keeps the polynomial's value)
//   sum8        eight vectors' lane sums at once, lane j = a[j]'s lanes in hsum's pairing
//   RoPE pairs  dup_pairs (each of 4 values twice), swap_pairs, addsub_pairs (even lanes a-b)
//   int8 dot    dot_u8i8: acc + each int32 lane's 4 byte products, unsigned u x signed q (vpmaddubsw
//               int16 pairs, which the caller keeps from saturating, then vpmaddwd)
//   narrowing   any_nan, abs_max, to_f16, to_bf16 (f32_to_bf16's rounding), to_q8 (kv_q8's codes)
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/simd/exp_poly.h"

namespace pagoda::backend::cpu::simd {
namespace {

struct Avx2 {
    using V = __m256;
    static constexpr int L = 8;

    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float f) { return _mm256_set1_ps(f); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }

    static float hsum(V v) {
        __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        q = _mm_add_ss(q, _mm_movehdup_ps(q));
        return _mm_cvtss_f32(q);
    }
    static float hmax(V v) {
        __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        q = _mm_max_ps(q, _mm_movehl_ps(q, q));
        q = _mm_max_ss(q, _mm_movehdup_ps(q));
        return _mm_cvtss_f32(q);
    }

    static V load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static V load_bf16(const uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }

    static V load_i8(const int8_t* p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }

    static V load_n(const float* p, int n) {
        float b[8] = {};
        std::memcpy(b, p, size_t(n) * sizeof(float));
        return _mm256_loadu_ps(b);
    }
    static V load_n(const float* p, int n, float fill) {
        float b[8] = {fill, fill, fill, fill, fill, fill, fill, fill};
        std::memcpy(b, p, size_t(n) * sizeof(float));
        return _mm256_loadu_ps(b);
    }
    static V load_i8_n(const int8_t* p, int n) {
        int8_t b[8] = {};
        std::memcpy(b, p, size_t(n));
        return load_i8(b);
    }
    static V first_n(V v, int n) {
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        return _mm256_and_ps(v, _mm256_castsi256_ps(keep));
    }
    static void store_n(float* p, V v, int n) {
        float b[8];
        _mm256_storeu_ps(b, v);
        std::memcpy(p, b, size_t(n) * sizeof(float));
    }
    static V load_f16_n(const uint16_t* p, int n) {
        uint16_t b[8] = {};
        std::memcpy(b, p, size_t(n) * sizeof(uint16_t));
        return load_f16(b);
    }
    static V load_bf16_n(const uint16_t* p, int n) {
        uint16_t b[8] = {};
        std::memcpy(b, p, size_t(n) * sizeof(uint16_t));
        return load_bf16(b);
    }

    // e^x and e^x for x <= 0: simd/exp_poly.h, over these operations.
    static V exp(V x) { return exp_poly7<Avx2>(x); }
    static V exp_nonpositive(V x) { return exp_nonpositive_poly<Avx2>(x); }
    static V min(V a, V b) { return _mm256_min_ps(a, b); }
    static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static V pow2(V n) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    }
    static V zero_below(V v, V x, V lo) { return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), v); }
    static V underflow(V v, V x, V lo) { return zero_below(v, x, lo); }  // a NaN x keeps v

    // Sums each of 8 vectors across its lanes: lane j of the result is the sum of a[j]'s lanes, always
    // paired the same way (lanes 4 apart, then 2, 1), whichever vector it is.
    static V sum8(const V* a) {
        __m256 b[4], c[2];
#pragma GCC unroll 16
        for (int k = 0; k < 4; ++k)  // lanes 4 apart; 128-bit halves: [a_k | a_k+4]
            b[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[k], a[k + 4], 0x20), _mm256_permute2f128_ps(a[k], a[k + 4], 0x31));
#pragma GCC unroll 16
        for (int k = 0; k < 2; ++k) {  // lanes 2 apart
            __m256d x = _mm256_unpacklo_pd(_mm256_castps_pd(b[k]), _mm256_castps_pd(b[k + 2]));
            __m256d y = _mm256_unpackhi_pd(_mm256_castps_pd(b[k]), _mm256_castps_pd(b[k + 2]));
            c[k] = _mm256_add_ps(_mm256_castpd_ps(x), _mm256_castpd_ps(y));
        }
        // lanes 1 apart; lane 4L + {0,1,2,3} of the sum holds vector [0,2,1,3][.] + 4L
        __m256 f = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
        return _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7));
    }

    static V dup_pairs(const float* p) {
        return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    }
    static V swap_pairs(V v) { return _mm256_permute_ps(v, 0xb1); }
    static V addsub_pairs(V a, V b) { return _mm256_addsub_ps(a, b); }

    static __m256i dot_u8i8(__m256i acc, __m256i u, __m256i q) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1)));
    }

    static bool any_nan(const float* x) {
        const __m256 v = _mm256_loadu_ps(x);
        return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0;
    }
    // acc = max(acc, |x|); whether |x| is finite in every lane (a NaN lane is caught here, whatever
    // max made of it).
    static bool abs_max(V& acc, V x) {
        const V a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
        acc = _mm256_max_ps(acc, a);
        return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(3.40282347e+38f), _CMP_LE_OQ)) == 0xff;
    }
    static void to_f16(const float* x, uint16_t* out) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // f32_to_bf16 on the bits: (u + 0x7fff + bit 16 of u) >> 16, NaN lanes (u >> 16) | 0x40.
    static void to_bf16(const float* x, uint16_t* out) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        const __m256i high = _mm256_srli_epi32(u, 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
        const __m256i rounded = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(high, _mm256_set1_epi32(1))), 16);
        const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
        // 8 lanes (each <= 0xffff) to 16 bits: pack within the 128-bit halves, then join them.
        const __m256i packed = _mm256_packus_epi32(h, h);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                         _mm_unpacklo_epi64(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1)));
    }
    // 8 codes: x / scale rounded half to even, clamped to +-127.
    static void to_q8(const float* x, float scale, int8_t* out) {
        const V r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x), _mm256_set1_ps(scale)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const V c = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        // 8 int32 (within +-127) to 8 bytes: pack to 16 bits, then to 8, within 128-bit halves.
        const __m256i i32 = _mm256_cvtps_epi32(c);
        const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi16(i16, i16));
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::simd
