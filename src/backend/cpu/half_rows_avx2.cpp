// AVX2 + F16C half-precision row conversions (contract: half_rows.h; loops: half_rows_simd.h).
#include <immintrin.h>

#include "backend/cpu/half_rows_simd.h"

namespace pagoda::kernels::detail {
namespace {

struct Avx2Half {
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
};

}  // namespace

void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_f16_row_t<Avx2Half>(x, n, out); }
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_bf16_row_t<Avx2Half>(x, n, out); }

}  // namespace pagoda::kernels::detail
