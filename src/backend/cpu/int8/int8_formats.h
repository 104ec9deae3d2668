// Internal: the weight formats of the fused int8 kernels (int8_fused.h), as traits the kernels are
// instantiated with. Each unpacks a weight block in registers straight from the GGUF bytes.
// A group is 8 consecutive 32-value blocks (one K-quant super-block); the last group of
// a simple-format row may hold fewer (n valid blocks; the other lanes read as zero).
//   scales(row, g, n, sc0, sc1, mn0, mn1): per-block weight scales of the group as 8 f32 lanes (sc1:
//       second 16-value half, per_half formats only) and per-block mins (has_min formats only; mn1:
//       second half's, for formats both per_half and has_min, Q2_K);
//   codes(row, g, j): the 32 codes of block j of group g, in value order.
// offset: the code offset folded into corr (signed formats: the Dot policy's).
#pragma once
#include <immintrin.h>

#include <cstring>

#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"

namespace pagoda::backend::cpu::detail {
namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
inline __m256i high_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)); }

// 16 bytes of Q4_0/Q4_1 nibbles -> 32 codes in value order (low nibbles, then high nibbles).
inline __m256i unpack_nibbles16(const uint8_t* qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return low_nibbles(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)));
}
inline __m256 f16x8(__m128i h) { return _mm256_cvtph_ps(h); }

// The f16 at p + j * Stride for the n (<= 8) blocks j of a group; 0 beyond n.
// Packed in integer registers (idle during the vector work), not through a stack buffer whose
// 2-byte stores a 16-byte reload could not forward from.
template <int Stride>
inline __m128i gather_f16(const uint8_t* p, int n) {
    uint64_t lo = 0, hi = 0;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
        uint16_t h = 0;
        if (j < n) std::memcpy(&h, p + j * Stride, 2);
        if (j < 4) lo |= uint64_t(h) << (16 * j);
        else hi |= uint64_t(h) << (16 * (j - 4));
    }
    return _mm_set_epi64x(int64_t(hi), int64_t(lo));
}

struct FmtQ8_0 {
    static constexpr int block_bytes = 34, offset = 0;
    static constexpr bool is_signed = true, has_min = false, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256&, __m256&) {
        sc0 = f16x8(gather_f16<34>(row + g * 8 * 34, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) { return load256(row + (g * 8 + j) * 34 + 2); }
};

struct FmtQ4_0 {
    static constexpr int block_bytes = 18, offset = 8;
    static constexpr bool is_signed = false, has_min = false, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256&, __m256&) {
        sc0 = f16x8(gather_f16<18>(row + g * 8 * 18, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) { return unpack_nibbles16(row + (g * 8 + j) * 18 + 2); }
};

struct FmtQ4_1 {
    static constexpr int block_bytes = 20, offset = 0;
    static constexpr bool is_signed = false, has_min = true, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256& mn, __m256&) {
        sc0 = f16x8(gather_f16<20>(row + g * 8 * 20, n));
        mn = f16x8(gather_f16<20>(row + g * 8 * 20 + 2, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) { return unpack_nibbles16(row + (g * 8 + j) * 20 + 4); }
};

// The eight 6-bit scales and mins of a Q4_K/Q5_K super-block (layout: quant::k_scale_min), as bytes.
inline void k_scale_bytes(const uint8_t* s, uint64_t& sc, uint64_t& mn) {
    uint32_t s0, s1, s2;
    std::memcpy(&s0, s, 4);
    std::memcpy(&s1, s + 4, 4);
    std::memcpy(&s2, s + 8, 4);
    const uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | (((s0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((s2 >> 4) & 0x0f0f0f0fu) | (((s1 >> 6) & 0x03030303u) << 4);
    sc = uint64_t(s0 & 0x3f3f3f3fu) | (uint64_t(sc_hi) << 32);
    mn = uint64_t(s1 & 0x3f3f3f3fu) | (uint64_t(mn_hi) << 32);
}

inline __m256 u8x8_to_f32(uint64_t v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(v))));
}

inline void k_scales(const uint8_t* blk, __m256& sc0, __m256& mn) {
    uint64_t sc, m;
    k_scale_bytes(blk + 4, sc, m);
    sc0 = _mm256_mul_ps(u8x8_to_f32(sc), _mm256_set1_ps(h2f(blk)));
    mn = _mm256_mul_ps(u8x8_to_f32(m), _mm256_set1_ps(-h2f(blk + 2)));
}

struct FmtQ4_K {
    static constexpr int block_bytes = 144 / 8, offset = 0;
    static constexpr bool is_signed = false, has_min = true, per_half = false, super = true;
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256&, __m256& mn, __m256&) {
        k_scales(row + g * 144, sc0, mn);
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const __m256i v = load256(row + g * 144 + 16 + 32 * (j / 2));
        return j % 2 ? high_nibbles(v) : low_nibbles(v);
    }
};

struct FmtQ5_K {
    static constexpr int block_bytes = 176 / 8, offset = 0;
    static constexpr bool is_signed = false, has_min = true, per_half = false, super = true;
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256&, __m256& mn, __m256&) {
        k_scales(row + g * 176, sc0, mn);
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const uint8_t* blk = row + g * 176;
        const __m256i v = load256(blk + 48 + 32 * (j / 2));
        const __m256i lo = j % 2 ? high_nibbles(v) : low_nibbles(v);
        // Bit j of qh[l] is the fifth bit of value l of sub-block j.
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(load256(blk + 16), j), _mm256_set1_epi8(1));
        return _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
    }
};

struct FmtQ6_K {
    static constexpr int block_bytes = 210 / 8, offset = 32;
    static constexpr bool is_signed = false, has_min = false, per_half = true, super = true;
    // int8 scale i belongs to 16 values: 32-block j has scales 2j (first half) and 2j+1.
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256& sc1, __m256&, __m256&) {
        const uint8_t* blk = row + g * 210;
        const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
        const __m256 d = _mm256_set1_ps(h2f(blk + 208));
        sc0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 16), 16)), d);
        sc1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(v, 16)), d);
    }
    // 32-block j: half h = j/4 of the super-block, quarter k = j%4; low 4 bits from ql (low nibbles
    // for k < 2), 2 high bits from qh at bit 2k.
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const uint8_t* blk = row + g * 210;
        const int h = j / 4, k = j % 4;
        const __m256i l = load256(blk + 64 * h + 32 * (k & 1));
        const __m256i lo = k < 2 ? low_nibbles(l) : high_nibbles(l);
        const __m256i qh = _mm256_srli_epi16(load256(blk + 128 + 32 * h), 2 * k);
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4);
        return _mm256_or_si256(lo, hi);
    }
};

// 32 bits -> 32 bytes, byte i = 0x10 when bit i is set (the fifth bit of Q5_0 / Q5_1 code i).
inline __m256i fifth_bits32(const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    // Byte i takes byte i / 8 of the bits (in-lane shuffle: each 128-bit lane holds all four bytes).
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

struct FmtQ5_0 {
    static constexpr int block_bytes = 22, offset = 16;
    static constexpr bool is_signed = false, has_min = false, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256&, __m256&) {
        sc0 = f16x8(gather_f16<22>(row + g * 8 * 22, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const uint8_t* blk = row + (g * 8 + j) * 22;
        return _mm256_or_si256(unpack_nibbles16(blk + 6), fifth_bits32(blk + 2));
    }
};

struct FmtQ5_1 {
    static constexpr int block_bytes = 24, offset = 0;
    static constexpr bool is_signed = false, has_min = true, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256& mn, __m256&) {
        sc0 = f16x8(gather_f16<24>(row + g * 8 * 24, n));
        mn = f16x8(gather_f16<24>(row + g * 8 * 24 + 2, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const uint8_t* blk = row + (g * 8 + j) * 24;
        return _mm256_or_si256(unpack_nibbles16(blk + 8), fifth_bits32(blk + 4));
    }
};

// 16 bytes -> the even bytes (first halves of the 32-blocks) and odd bytes (second halves) as 8
// int32 lanes each: lane j = byte 2j / 2j+1.
inline void split_even_odd(__m128i bytes, __m256i& even, __m256i& odd) {
    const __m256i w = _mm256_cvtepu8_epi16(bytes);  // 32-bit lane j = byte 2j | byte 2j+1 << 16
    even = _mm256_and_si256(w, _mm256_set1_epi32(0xffff));
    odd = _mm256_srli_epi32(w, 16);
}

// The 2-bit codes of 32-block j of a Q2_K / Q3_K super-block whose qs bytes start at qs: values of
// half j / 4 at bits 2 (j % 4).
inline __m256i two_bit_codes(const uint8_t* qs, int j) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (j / 4)), 2 * (j % 4)), _mm256_set1_epi8(3));
}

struct FmtQ2_K {
    static constexpr int block_bytes = 84 / 8, offset = 0;
    static constexpr bool is_signed = false, has_min = true, per_half = true, super = true;
    // Scale byte k (16-value sub-block k = half k % 2 of 32-block k / 2): scale low nibble, min high.
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256& sc1, __m256& mn0, __m256& mn1) {
        const uint8_t* blk = row + g * 84;
        __m256i even, odd;
        split_even_odd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)), even, odd);
        const __m256 d = _mm256_set1_ps(h2f(blk + 80)), neg_dmin = _mm256_set1_ps(-h2f(blk + 82));
        const __m256i nib = _mm256_set1_epi32(0x0f);
        sc0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(even, nib)), d);
        sc1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(odd, nib)), d);
        mn0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(even, 4)), neg_dmin);
        mn1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(odd, 4)), neg_dmin);
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) { return two_bit_codes(row + g * 84 + 16, j); }
};

struct FmtQ3_K {
    static constexpr int block_bytes = 110 / 8, offset = 4;
    static constexpr bool is_signed = false, has_min = false, per_half = true, super = true;
    // The sixteen 6-bit scales (quant::q3_k_scale), minus 32, times d.
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256& sc1, __m256&, __m256&) {
        const uint8_t* blk = row + g * 110;
        uint32_t s0, s1, s2;
        std::memcpy(&s0, blk + 96, 4);
        std::memcpy(&s1, blk + 100, 4);
        std::memcpy(&s2, blk + 104, 4);
        const uint32_t lo = 0x0f0f0f0fu, hi = 0x03030303u;
        const __m128i sc = _mm_setr_epi32(int((s0 & lo) | ((s2 & hi) << 4)), int((s1 & lo) | (((s2 >> 2) & hi) << 4)),
                                          int(((s0 >> 4) & lo) | (((s2 >> 4) & hi) << 4)),
                                          int(((s1 >> 4) & lo) | (((s2 >> 6) & hi) << 4)));
        __m256i even, odd;
        split_even_odd(sc, even, odd);
        const __m256 d = _mm256_set1_ps(h2f(blk + 108));
        const __m256i bias = _mm256_set1_epi32(32);
        sc0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(even, bias)), d);
        sc1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(odd, bias)), d);
    }
    // Low 2 bits from qs, the third from hmask byte l at bit j (= 4 * half + quarter).
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        const uint8_t* blk = row + g * 110;
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(load256(blk), j), _mm256_set1_epi8(1));
        return _mm256_or_si256(two_bit_codes(blk + 32, j), _mm256_slli_epi16(high, 2));
    }
};

// Codebook types (quant/codebook_blocks.h): signed int8 codes. IQ4_NL, MXFP4 and IQ4_XS look their
// nibbles up in a register (16-byte table, vpshufb); the grid types (IQ1/IQ2/IQ3) decode each
// 32-value sub-block with the scalar decoder and have a scale per 16-value half.
inline __m256i lookup_nibbles16(const uint8_t* qs, const int8_t* table) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
    return _mm256_shuffle_epi8(t, unpack_nibbles16(qs));
}

struct FmtIQ4_NL {
    static constexpr int block_bytes = 18, offset = 0;
    static constexpr bool is_signed = true, has_min = false, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256&, __m256&) {
        sc0 = f16x8(gather_f16<18>(row + g * 8 * 18, n));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        return lookup_nibbles16(row + (g * 8 + j) * 18 + 2, quant::kValuesIq4nl);
    }
};

struct FmtMXFP4 {
    static constexpr int block_bytes = 17, offset = 0;
    static constexpr bool is_signed = true, has_min = false, per_half = false, super = false;
    static void scales(const uint8_t* row, int64_t g, int n, __m256& sc0, __m256&, __m256&, __m256&) {
        float s[8];
        for (int j = 0; j < 8; ++j) s[j] = j < n ? quant::e8m0_half_to_f32(row[(g * 8 + j) * 17]) : 0.f;
        sc0 = _mm256_loadu_ps(s);
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        return lookup_nibbles16(row + (g * 8 + j) * 17 + 1, quant::kValuesMxfp4);
    }
};

struct FmtIQ4_XS {
    static constexpr int block_bytes = 136 / 8, offset = 0;
    static constexpr bool is_signed = true, has_min = false, per_half = false, super = true;
    // Sub-block j's scale d * (ls - 32), ls: nibble j % 2 of scales_l[j / 2] | 2 bits of scales_h << 4.
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256&, __m256&, __m256&) {
        const uint8_t* blk = row + g * 136;
        uint16_t h;
        std::memcpy(&h, blk + 2, 2);
        int32_t ls[8];
        for (int j = 0; j < 8; ++j) ls[j] = (((blk[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | (((h >> (2 * j)) & 3) << 4)) - 32;
        sc0 = _mm256_mul_ps(_mm256_set1_ps(h2f(blk)),
                            _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ls))));
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        return lookup_nibbles16(row + g * 136 + 8 + 16 * j, quant::kValuesIq4nl);
    }
};

template <gguf::GgmlType Type, int BlockBytes>
struct FmtGrid {
    static constexpr int block_bytes = BlockBytes / 8, offset = 0;
    static constexpr bool is_signed = true, has_min = false, per_half = true, super = true;
    static void scales(const uint8_t* row, int64_t g, int, __m256& sc0, __m256& sc1, __m256&, __m256&) {
        float a[8], b[8], s[2];
        for (int j = 0; j < 8; ++j) {
            quant::codebook_scales(Type, row + g * BlockBytes, j, s);
            a[j] = s[0];
            b[j] = s[1];
        }
        sc0 = _mm256_loadu_ps(a);
        sc1 = _mm256_loadu_ps(b);
    }
    static __m256i codes(const uint8_t* row, int64_t g, int j) {
        int8_t c[32];
        quant::codebook_codes(Type, row + g * BlockBytes, j, c);
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::detail
