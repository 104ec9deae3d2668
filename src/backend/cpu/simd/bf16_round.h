// Internal: f32 -> bf16 as VCVTNE2PS2BF16 / VCVTNEPS2BF16 define it, written with AVX-512F integer
// operations so it runs on every AVX-512 CPU (the AMX bf16 tiles, and their emulation on hosts
// without AVX-512 BF16, need the same rounding as the bf16 dot kernel):
//   zero exponent (zero or denormal)  -> signed zero
//   NaN                               -> its top 16 bits with the quiet bit (bit 6) set
//   otherwise                         -> round to nearest even on bit 16: (bits + 0x7fff + bit16) >> 16
// Include only from TUs compiled with the AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace pagoda::backend::cpu::detail {

// Each dword's low 16 bits: the bf16 of that lane (high 16 bits zero).
inline __m512i bf16_round_lanes(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)),
                         _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1))),
        16);
    const __m512i top = _mm512_srli_epi32(bits, 16);
    const __m512i abs = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 tiny = _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7f800000)), _mm512_setzero_si512());
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i out = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
    return _mm512_mask_blend_epi32(tiny, out, _mm512_and_si512(top, _mm512_set1_epi32(0x8000)));
}

// 32 values (lo: values 0-15, hi: 16-31) as 32 consecutive bf16 words, i.e. 16 dwords of
// consecutive pairs: the bytes of VCVTNE2PS2BF16(hi, lo).
inline __m512i bf16_round_pairs(__m512 lo, __m512 hi) {
    const __m256i l = _mm512_cvtepi32_epi16(bf16_round_lanes(lo));
    const __m256i h = _mm512_cvtepi32_epi16(bf16_round_lanes(hi));
    return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
}

}  // namespace pagoda::backend::cpu::detail
