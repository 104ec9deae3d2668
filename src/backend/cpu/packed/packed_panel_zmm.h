// Internal: block b of two packed panels read into zmm registers at once (rows 0-7 of the first panel
// in the low half, the second panel's in the high half): the same code bytes and scales as
// decode_panel_block (packed_panel.h) gives each panel, joined. The raw bytes are joined first and
// unpacked on zmm, which takes half the vector operations of unpacking each panel on ymm and joining
// the results; the narrow kernel's steps of a few tokens (batched decode) are bound by those
// operations, which share the two 512-bit ports with vpdpbusd (docs/benchmarks.md, Ice Lake).
// AVX-512 (F/BW) only: included by matmul_packed_avx512.cpp alone; internal linkage.
#pragma once
#include <immintrin.h>

#include "backend/cpu/packed/packed_panel.h"

namespace pagoda::backend::cpu::detail {
namespace {

inline __m512i join_rows(const uint8_t* lo, const uint8_t* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
}

// c[k]: code group k of the 16 rows (decode_panel_block's vector k of each panel, joined); sc, mn:
// the panels' scales and mins, joined.
template <Fmt F, bool HighInPlace>
[[gnu::always_inline]] inline void decode_joined_block(const uint8_t* const* pb, const uint8_t* const* sbp, __m512i* c,
                                                       __m512& sc, __m512& mn, const SuperScales* ss = nullptr) {
    using P = PanelFormat<F>;
    static_assert(!HighInPlace || P::may_keep_high_in_place);
    __m256 s[2], m[2];
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
        __m256i unused[8];  // only the scales are taken from here: the compiler drops the code work
        decode_panel_block<F, false>(pb[j], sbp[j], unused, s[j], m[j], ss ? ss + j : nullptr);
    }
    sc = _mm512_insertf32x8(_mm512_castps256_ps512(s[0]), s[1], 1);
    mn = _mm512_insertf32x8(_mm512_castps256_ps512(m[0]), m[1], 1);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    if constexpr (P::nibbles) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const __m512i v = join_rows(pb[0] + 32 * k, pb[1] + 32 * k);
            c[k] = _mm512_and_si512(v, low4);
            c[k + 4] = HighInPlace ? _mm512_andnot_si512(low4, v) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
    } else {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) c[k] = join_rows(pb[0] + 32 * k, pb[1] + 32 * k);
    }
    if constexpr (P::codebook) {  // nibble -> codebook value + 128, as decode_panel_block
        const __m512i table = _mm512_broadcast_i32x4(codebook_table<F>());
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) c[k] = _mm512_shuffle_epi8(table, c[k]);
    }
    if constexpr (P::q6) {
        merge_q6_high(c, join_rows(pb[0] + 128, pb[1] + 128), join_rows(pb[0] + 160, pb[1] + 160), _mm512_set1_epi8(0x30));
    } else if constexpr (P::fifth) {
        // Fifth bit of group k: bit k of the bit vector, moved to bit 4.
        const __m512i hb = join_rows(pb[0] + 128, pb[1] + 128), one = _mm512_set1_epi8(1);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
            c[k] = _mm512_or_si512(c[k], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, k), one), 4));
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
