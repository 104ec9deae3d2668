// AVX2 + F16C half-precision row conversions (contract: half_rows.h), 8 values a step.
#include <immintrin.h>

#include "backend/cpu/half_rows.h"

namespace pagoda::kernels::detail {

void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {  // a NaN: the scalar's quiet NaN
            f32_to_f16_row_reference(x + i, 8, out + i);
            continue;
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    f32_to_f16_row_reference(x + i, n - i, out + i);
}

// Round to nearest even on the bits (u + 0x7fff + bit 16 of u, then the high half), as f32_to_bf16;
// NaN lanes become (u >> 16) | 0x40.
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out) {
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i rounded = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
        const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
        // 8 x 32-bit lanes (each <= 0xffff) to 8 x 16 bits: pack within 128-bit halves, then join.
        const __m256i packed = _mm256_packus_epi32(h, h);
        const __m128i joined = _mm_unpacklo_epi64(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), joined);
    }
    f32_to_bf16_row_reference(x + i, n - i, out + i);
}

}  // namespace pagoda::kernels::detail
