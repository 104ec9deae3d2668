// AVX-512 half-precision row conversions (contract: half_rows.h), 16 values a step; only AVX-512 F
// (no AVX512_BF16: its conversion is not specified to match f32_to_bf16 on every input).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on _mm512_* intrinsics
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "backend/cpu/half_rows.h"

namespace pagoda::kernels::detail {

void f32_to_f16_row_avx512(const float* x, int64_t n, uint16_t* out) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {  // a NaN: the scalar's quiet NaN
            f32_to_f16_row_reference(x + i, 16, out + i);
            continue;
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    f32_to_f16_row_reference(x + i, n - i, out + i);
}

void f32_to_bf16_row_avx512(const float* x, int64_t n, uint16_t* out) {
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_loadu_si512(x + i);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
        const __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
        const __m512i h = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(h));
    }
    f32_to_bf16_row_reference(x + i, n - i, out + i);
}

}  // namespace pagoda::kernels::detail
