// AVX2 + F16C KV row encoders (contract: kv_rows.h; loops: kv_rows_simd.h).
#include <immintrin.h>

#include "backend/cpu/kv/kv_rows_simd.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx2Rows {
    static constexpr int L = 8;
    static bool any_nan(const float* x) {
        const __m256 v = _mm256_loadu_ps(x);
        return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0;
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
    using V = __m256;
    static V load(const float* x) { return _mm256_loadu_ps(x); }
    static V zero() { return _mm256_setzero_ps(); }
    static bool abs_max(V& acc, V x) {
        const V a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
        acc = _mm256_max_ps(acc, a);  // a NaN lane is caught below, whatever max made of it
        return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(3.40282347e+38f), _CMP_LE_OQ)) == 0xff;
    }
    static float hmax(V v) {
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        return _mm_cvtss_f32(m);
    }
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

void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_f16_row_t<Avx2Rows>(x, n, out); }
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_bf16_row_t<Avx2Rows>(x, n, out); }
float quantize_row_q8_avx2(const float* x, int8_t* q, int64_t n) { return quantize_row_q8_t<Avx2Rows>(x, q, n); }

}  // namespace pagoda::backend::cpu::detail
