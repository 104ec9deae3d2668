// Internal: reading one 32-value block of a packed panel (layout: matmul_paths.h) into registers.
// Shared by the AVX-512 VNNI kernel (matmul_packed_avx512.cpp) and the AMX tile kernel (amx_kernel.h)
// so both multiply the very same code bytes and scales: the first half of the bitwise agreement
// between them (the second is the epilogue's float sequence, see amx_kernel.h). AVX2 + F16C only, so the
// AVX2 panel kernel (matmul_packed_avx2.cpp) reads the same bytes too. Internal linkage: each ISA
// file compiles its own copy with its own flags (one shared copy could carry AVX-512 encodings).
#pragma once
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "quant/codebook_blocks.h"

namespace pagoda::backend::cpu::detail {
namespace {

enum class Fmt { q4_0, q4_1, q5_0, q8_0, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4 };

// The 16-entry codebooks of IQ4_NL / IQ4_XS and MXFP4 (quant/codebook_blocks.h) plus 128: the panels
// keep these types' nibbles and decode looks them up (vpshufb) into unsigned codes with Q8_0's offset.
constexpr std::array<uint8_t, 16> plus128(const int8_t (&values)[16]) {
    std::array<uint8_t, 16> out{};
    for (int i = 0; i < 16; ++i) out[size_t(i)] = uint8_t(values[i] + 128);
    return out;
}
inline constexpr std::array<uint8_t, 16> kIq4nlPlus128 = plus128(quant::kValuesIq4nl);
inline constexpr std::array<uint8_t, 16> kMxfp4Plus128 = plus128(quant::kValuesMxfp4);

template <Fmt F>
struct PanelFormat {
    static constexpr bool nibbles = F != Fmt::q8_0, q5 = F == Fmt::q5_k, kq = F == Fmt::q4_k || q5, q6 = F == Fmt::q6_k;
    static constexpr bool q41 = F == Fmt::q4_1, q50 = F == Fmt::q5_0, has_min = kq || q41;
    static constexpr bool fifth = q5 || q50;  // a vector of fifth bits after the nibble vectors
    static constexpr bool iq4_nl = F == Fmt::iq4_nl, iq4_xs = F == Fmt::iq4_xs, mxfp4 = F == Fmt::mxfp4;
    static constexpr bool codebook = iq4_nl || iq4_xs || mxfp4;  // nibbles index a 16-value codebook
    // Codes stored (or looked up) as signed weight + 128, as Q8_0's: the AVX2 kernel multiplies them
    // as signed bytes (kQ8Signed), the VNNI kernel as unsigned bytes with a correction.
    static constexpr bool signed_codes = F == Fmt::q8_0 || codebook;
    // Panels with a header per 256-value super-block before their blocks (K-quants, IQ4_XS).
    static constexpr bool super = kq || q6 || iq4_xs;
    static constexpr int64_t code_bytes = nibbles ? 128 : 256;
    // Bytes of one 32-value block of a panel, and of a super-block's header.
    static constexpr int64_t pbb = kq ? (q5 ? 176 : 144) : q6 ? 208 : q41 ? 160 : q50 ? 176 : iq4_xs || mxfp4 ? 136 : code_bytes + 16;
    static constexpr int64_t sb_head = kq ? 32 : 16;
    // 4-bit codes without extra bits may keep their high nibbles in place (16 x code): see the VNNI kernel.
    static constexpr bool may_keep_high_in_place = F == Fmt::q4_0 || F == Fmt::q4_1 || F == Fmt::q4_k;
    // What a stored code carries above its signed weight (Q8_0: +128; the zero points of Q4_0 and
    // Q6_K); formats with a min have none (the min is a separate term).
    static constexpr int code_offset = F == Fmt::q4_0 ? 8 : F == Fmt::q5_0 ? 16 : signed_codes ? 128 : F == Fmt::q6_k ? 32 : 0;
};

// The codebook (plus 128) of a codebook format, as the 16-byte vpshufb table.
template <Fmt F>
inline __m128i codebook_table() {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>((F == Fmt::mxfp4 ? kMxfp4Plus128 : kIq4nlPlus128).data()));
}

// MXFP4's e8m0 scale bytes of 8 rows (8 bytes at p), halved: 2^(e - 128) per row as
// quant::e8m0_half_to_f32 gives it (the f32 bits (e - 1) << 23, or a denormal 0x00200000 << e for e < 2).
inline __m256 e8m0_half_x8(const uint8_t* p) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i denormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, denormal, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

// Block b of a panel of nb blocks: its bytes (pb) and, for K-quants, its super-block's header (sbp;
// else the panel). The K-quant panels hold their super-block headers first, then the blocks, so the
// blocks are one run of equal strides as Q4_0's are (matmul_paths.h).
template <Fmt F>
inline const uint8_t* panel_block(const uint8_t* panel, int64_t b, int64_t nb, const uint8_t*& sbp) {
    using P = PanelFormat<F>;
    if constexpr (P::super) {
        sbp = panel + b / 8 * P::sb_head;
        return panel + nb / 8 * P::sb_head + b * P::pbb;
    }
    sbp = panel;
    return panel + b * P::pbb;
}

// Q6_K: ors each code group's two high bits into bits 4-5 of its bytes (c: 8 code vectors of any
// width; h0 / h1: the high-bit vectors of groups 0-3 / 4-7, group k in field k % 4 of each byte;
// m30: 0x30 in every byte). GCC's vector operators shift 64-bit lanes; the mask keeps, in each
// byte, only bits that came from that same byte, so the result is a per-byte shift's.
template <class I>
inline void merge_q6_high(I* c, I h0, I h1, I m30) {
    c[0] |= (h0 << 4) & m30;
    c[1] |= (h0 << 2) & m30;
    c[2] |= h0 & m30;
    c[3] |= (h0 >> 2) & m30;
    c[4] |= (h1 << 4) & m30;
    c[5] |= (h1 << 2) & m30;
    c[6] |= h1 & m30;
    c[7] |= (h1 >> 2) & m30;
}

// A K-quant super-block's d and dmin (f16 in its header) as f32 for 8 rows. decode_panel_block
// converts them for every block unless it is handed them: kernels that walk a panel's blocks in
// order convert them once per super-block (the same values, so the same scales).
struct SuperScales {
    __m256 d, dmin;
};
inline SuperScales super_scales(const uint8_t* sbp) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sbp))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sbp + 16)))};
}

// The block's codes as 8 vectors (vector k: the 4-byte code groups k of the 8 rows, values 4k..4k+3,
// unsigned; Q8_0, IQ4_NL, IQ4_XS, MXFP4: weight + 128; Q5_0 / Q5_K: the fifth bit merged in) and per row its scale sc and min mn (Q6_K: the scales of the first and
// of the last 16 values; formats without a min: mn = 0). HighInPlace: the high nibbles (groups 4-7)
// stay multiplied by 16 (only where may_keep_high_in_place). ss, where given, is super_scales(sbp)
// (read by the K-quants only).
template <Fmt F, bool HighInPlace = false>
inline void decode_panel_block(const uint8_t* pb, const uint8_t* sbp, __m256i* c, __m256& sc, __m256& mn,
                               const SuperScales* ss = nullptr) {
    using P = PanelFormat<F>;
    static_assert(!HighInPlace || P::may_keep_high_in_place);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    if constexpr (P::nibbles) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * k));
            c[k] = _mm256_and_si256(v, low4);
            c[k + 4] = HighInPlace ? _mm256_andnot_si256(low4, v) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
    } else {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) c[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * k));
    }
    if constexpr (P::codebook) {
        const __m256i table = _mm256_broadcastsi128_si256(codebook_table<F>());
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) c[k] = _mm256_shuffle_epi8(table, c[k]);
    }
    if constexpr (P::fifth) {
        // Fifth bit of group k: bit k of the bit vector, moved to bit 4.
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 128)), one = _mm256_set1_epi8(1);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
            c[k] = _mm256_or_si256(c[k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, k), one), 4));
    }
    if constexpr (P::q6) {
        const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 128));
        const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 160));
        merge_q6_high(c, h0, h1, _mm256_set1_epi8(0x30));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sbp)));
        sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + 192)))), d);
        mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + 200)))), d);
    } else if constexpr (P::kq) {
        const SuperScales own = ss ? *ss : super_scales(sbp);
        const __m256 d = own.d, dmin = own.dmin;
        sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + P::pbb - 16)))), d);
        mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + P::pbb - 8)))), dmin);
    } else if constexpr (P::iq4_xs) {
        // Sub-block scale d * (ls - 32), the int8 (ls - 32) of the 8 rows stored after the codes.
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sbp)));
        sc = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + 128)))), d);
        mn = _mm256_setzero_ps();
    } else if constexpr (P::mxfp4) {
        sc = e8m0_half_x8(pb + 128);
        mn = _mm256_setzero_ps();
    } else if constexpr (P::q50) {
        sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + P::code_bytes + 32)));
        mn = _mm256_setzero_ps();
    } else {
        sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + P::code_bytes)));
        mn = P::q41 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + P::code_bytes + 16)))
                    : _mm256_setzero_ps();
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
