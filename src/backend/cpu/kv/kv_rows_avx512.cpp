// AVX-512 KV row encoders (contract: kv_rows.h; loops: kv_rows_simd.h). Only
// AVX-512 F: AVX512_BF16's conversion is not specified to match f32_to_bf16 on every input.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on _mm512_* intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "backend/cpu/kv/kv_rows_simd.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx512Rows {
    static constexpr int L = 16;
    static bool any_nan(const float* x) {
        const __m512 v = _mm512_loadu_ps(x);
        return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0;
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
    using V = __m512;
    static V load(const float* x) { return _mm512_loadu_ps(x); }
    static V zero() { return _mm512_setzero_ps(); }
    static bool abs_max(V& acc, V x) {
        const V a = _mm512_abs_ps(x);
        acc = _mm512_max_ps(acc, a);  // a NaN lane is caught below, whatever max made of it
        return _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.40282347e+38f), _CMP_LE_OQ) == 0xffff;
    }
    static float hmax(V v) { return _mm512_reduce_max_ps(v); }
    static void to_q8(const float* x, float scale, int8_t* out) {
        const V r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x), _mm512_set1_ps(scale)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const V c = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(c)));
    }
};

}  // namespace

void f32_to_f16_row_avx512(const float* x, int64_t n, uint16_t* out) { f32_to_f16_row_t<Avx512Rows>(x, n, out); }
void f32_to_bf16_row_avx512(const float* x, int64_t n, uint16_t* out) { f32_to_bf16_row_t<Avx512Rows>(x, n, out); }
float quantize_row_q8_avx512(const float* x, int8_t* q, int64_t n) { return quantize_row_q8_t<Avx512Rows>(x, q, n); }

}  // namespace pagoda::backend::cpu::detail
