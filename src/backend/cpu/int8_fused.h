// Internal: the fused int8 kernels of the quantised matmul (AVX2 / AVX-512 VNNI), included by
// matmul_int8_avx2.cpp and matmul_int8_avx512.cpp with an integer-dot policy `Dot`. Weight blocks are
// unpacked in registers straight from the GGUF bytes (no row buffer), so decode streams the weights.
//
// Per output (row r, token t) and group of 8 consecutive 32-value blocks b..b+8, with u the weight's
// codes (unsigned; Q8_0 signed), q the activation's int8 codes, d its per-block scales:
//   i_j   = dot(u_j, q_j)                    8 int32 lanes per block j, exact
//   H     = reduction tree of the i_j        one exact int32 lane per block (per 16-value half for
//                                            Q6_K, Q3_K, Q2_K) + corr, which folds a constant code
//                                            offset in exactly (-offset * sum(q))
//   acc  += f32(H) * (sc * d)                sc: the weight's 8 block scales (one FMA per 8 blocks;
//                                            per-half formats: first halves, then second halves)
// and for formats with a separate min (Q4_1, Q5_1, Q4_K, Q5_K):
//   macc += mins * s                         s = d * sum(q) of each block
// or, with a min per 16-value half (Q2_K): macc += mins0 * s0, then macc += mins1 * s1 (s0, s1:
// d * sum(q) of each block's first / second half).
// out = hsum(acc) (+ hsum(macc)). This sequence depends only on (r, t): not on n_tokens, on the
// register block sizes, on the thread split, so the result is batch invariant.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "backend/cpu/fused_acts.h"
#include "backend/cpu/matmul_paths.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include "backend/cpu/int8_quantize_avx512.h"
#endif

namespace pagoda::kernels::detail {
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

// Format traits. A group is 8 consecutive 32-value blocks (one K-quant super-block); the last group of
// a simple-format row may hold fewer (n valid blocks; the other lanes read as zero).
//   scales(row, g, n, sc0, sc1, mn0, mn1): per-block weight scales of the group as 8 f32 lanes (sc1:
//       second 16-value half, per_half formats only) and per-block mins (has_min formats only; mn1:
//       second half's, for formats both per_half and has_min, Q2_K);
//   codes(row, g, j): the 32 codes of block j of group g, in value order.
// offset: the code offset folded into corr (signed formats: the Dot policy's).
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

inline float hsum256(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

// Exact int32 reduction steps (unpack + add: single-uop instructions, unlike vphaddd). Per 128-bit
// half: level1(a, b) = [a0+a2, b0+b2, a1+a3, b1+b3]; level2 of two such results for blocks (i, j) and
// (k, l) = [sum of i, sum of j, sum of k, sum of l] over that half's four lanes.
inline __m256i reduce_level1(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
inline __m256i reduce_level2(__m256i p, __m256i q) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(p, q), _mm256_unpackhi_epi64(p, q));
}

// Per group of 8 blocks and output: 8 integer dots, an exact integer reduction (unpack-add tree) to one
// int32 lane per block (or per half), then one f32 convert and FMA for the 8 blocks.
template <class Dot, class F, int R, int T>
void fused_kernel(const uint8_t* const* w, const FusedActs& a, int64_t t0, float* out) {
    __m256 acc[T][R], macc[T][R];
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) acc[t][r] = macc[t][r] = _mm256_setzero_ps();
    const int64_t n_groups = (a.nb + 7) / 8;
    for (int64_t g = 0; g < n_groups; ++g) {
        const int n = int(std::min<int64_t>(8, a.nb - g * 8));
        __m256 sc0[R], sc1[R], mn[R], mn1[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) sc1[r] = mn[r] = mn1[r] = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) F::scales(w[r], g, n, sc0[r], sc1[r], mn[r], mn1[r]);
        __m256i pend[T][R], x[T][R];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            __m256i u0[R], u1[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                u0[r] = 2 * p < n ? Dot::template prepare_codes<F::is_signed>(F::codes(w[r], g, 2 * p)) : _mm256_setzero_si256();
                u1[r] = 2 * p + 1 < n ? Dot::template prepare_codes<F::is_signed>(F::codes(w[r], g, 2 * p + 1)) : _mm256_setzero_si256();
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int8_t* q = a.q + (t0 + t) * a.cols + g * 256 + 64 * p;
                const __m256i q0 = 2 * p < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)) : _mm256_setzero_si256();
                const __m256i q1 = 2 * p + 1 < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)) : _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    const __m256i z = _mm256_setzero_si256();
                    const __m256i h = reduce_level1(Dot::template dot<F::is_signed>(z, u0[r], q0),
                                                    Dot::template dot<F::is_signed>(z, u1[r], q1));
                    if (p % 2 == 0) pend[t][r] = h;
                    else if (p == 1) x[t][r] = reduce_level2(pend[t][r], h);
                    else {
                        // x: halves of blocks 0-3 (first halves low, second halves high); y: blocks 4-7.
                        const __m256i y = reduce_level2(pend[t][r], h);
                        __m256i h0 = _mm256_permute2x128_si256(x[t][r], y, 0x20);
                        __m256i h1 = _mm256_permute2x128_si256(x[t][r], y, 0x31);
                        const int64_t tg = (t0 + t) * a.nbp + g * 8;
                        const __m256 dx = _mm256_loadu_ps(a.d + tg);
                        const int32_t* c = a.corr ? a.corr + tg * 2 : nullptr;
                        if constexpr (F::per_half) {
                            if (c) {
                                h0 = _mm256_add_epi32(h0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
                                h1 = _mm256_add_epi32(h1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 8)));
                            }
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h0), _mm256_mul_ps(sc0[r], dx), acc[t][r]);
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h1), _mm256_mul_ps(sc1[r], dx), acc[t][r]);
                        } else {
                            __m256i sum = _mm256_add_epi32(h0, h1);
                            if (c) sum = _mm256_add_epi32(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(sc0[r], dx), acc[t][r]);
                        }
                        if constexpr (F::has_min && F::per_half) {
                            macc[t][r] = _mm256_fmadd_ps(mn[r], _mm256_loadu_ps(a.sh + tg * 2), macc[t][r]);
                            macc[t][r] = _mm256_fmadd_ps(mn1[r], _mm256_loadu_ps(a.sh + tg * 2 + 8), macc[t][r]);
                        } else if constexpr (F::has_min) {
                            macc[t][r] = _mm256_fmadd_ps(mn[r], _mm256_loadu_ps(a.s + tg), macc[t][r]);
                        }
                    }
                }
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r)
            out[t * R + r] = F::has_min ? hsum256(acc[t][r]) + hsum256(macc[t][r]) : hsum256(acc[t][r]);
}

template <class Dot, class F, int R, int T>
void fused_dispatch(int tokens, const uint8_t* const* w, const FusedActs& a, int64_t t0, float* out) {
    if constexpr (T > 1) {
        if (tokens < T) return fused_dispatch<Dot, F, R, T - 1>(tokens, w, a, t0, out);
    }
    fused_kernel<Dot, F, R, T>(w, a, t0, out);
}

// Storage of FusedActs, reused across calls by each calling thread.
struct FusedBuffers {
    std::vector<int8_t> q;
    std::vector<float> d, s, sh;
    std::vector<int32_t> corr;
};

// One token's activations, quantised as int8_operands.h specifies (bitwise the same values as
// quantize_activations: the same f32 max, scale, product and round-to-nearest-even conversion), with
// the per-block operands of the fused kernels written in the same pass: d, s = d*sum(first half) +
// d*sum(second half), sh = the two terms apart (when not null), and corr = -offset * sum(q) per block
// (per half when per_half); s may be null (not wanted); and, when `sums` is not null, the exact int32 sums of q over each block's
// two halves (sums[2b], sums[2b+1]: what s, sh and corr are made of, for activations quantised ahead
// of their matmuls).
inline void quantize_token_fused(const float* x, int64_t nb, int64_t nbp, int offset, bool per_half, int8_t* q,
                                 float* d, float* s, float* sh, int32_t* corr, int32_t* sums = nullptr) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t b = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    // Whole groups of 16 blocks with the per-block scalars in vector lanes (int8_quantize_avx512.h);
    // the same values as the loop below.
    for (; b + 16 <= nb; b += 16)
        quantize_blocks16_avx512(x + b * 32, b, offset, per_half, q + b * 32, d, s, sh, corr, sums);
#endif
    for (; b < nb; ++b) {
        const float* xb = x + b * 32;
        __m256 v[4];
        for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float scale = amax / 127.f;
        const __m256 inv = _mm256_set1_ps(amax > 0 ? 127.f / amax : 0.f);
        __m256i iv[4];
        for (int i = 0; i < 4; ++i) {
            iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));  // MXCSR default: nearest even
            iv[i] = _mm256_max_epi32(_mm256_min_epi32(iv[i], _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
        }
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), _mm256_permutevar8x32_epi32(p, perm));
        auto hsum_i = [](__m256i a) {
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
            return _mm_cvtsi128_si32(h);
        };
        const int32_t h0 = hsum_i(_mm256_add_epi32(iv[0], iv[1])), h1 = hsum_i(_mm256_add_epi32(iv[2], iv[3]));
        if (sums) {
            sums[2 * b] = h0;
            sums[2 * b + 1] = h1;
        }
        d[b] = scale;
        if (s) s[b] = scale * float(h0) + scale * float(h1);
        if (sh) {
            sh[b / 8 * 16 + b % 8] = scale * float(h0);
            sh[b / 8 * 16 + 8 + b % 8] = scale * float(h1);
        }
        if (offset) {
            int32_t* c = corr + b / 8 * 16 + b % 8;
            if (per_half) {
                c[0] = -offset * h0;
                c[8] = -offset * h1;
            } else {
                c[0] = -offset * (h0 + h1);
            }
        }
    }
    for (b = nb; b < nbp; ++b) {
        d[b] = 0.f;
        if (s) s[b] = 0.f;
        if (sums) sums[2 * b] = sums[2 * b + 1] = 0;
        if (sh) sh[b / 8 * 16 + b % 8] = sh[b / 8 * 16 + 8 + b % 8] = 0.f;
        if (offset) corr[b / 8 * 16 + b % 8] = corr[b / 8 * 16 + 8 + b % 8] = 0;
    }
}

// half_sums: also fill FusedActs::sh (formats with a min per 16-value half).
inline FusedActs quantize_fused(const float* x, int64_t n_tokens, int64_t cols, int offset, bool per_half,
                                FusedBuffers& buf, ThreadPool& pool, bool half_sums = false) {
    const int64_t nb = cols / 32, nbp = (nb + 7) / 8 * 8;
    buf.q.resize(size_t(n_tokens * cols));
    buf.d.resize(size_t(n_tokens * nbp));
    buf.s.resize(size_t(n_tokens * nbp));
    if (half_sums) buf.sh.resize(size_t(n_tokens * nbp * 2));
    if (offset) buf.corr.assign(size_t(n_tokens * nbp * 2), 0);
    auto one = [&](int t, int) {
        quantize_token_fused(x + t * cols, nb, nbp, offset, per_half, buf.q.data() + t * cols, buf.d.data() + t * nbp,
                             buf.s.data() + t * nbp, half_sums ? buf.sh.data() + t * nbp * 2 : nullptr,
                             offset ? buf.corr.data() + t * nbp * 2 : nullptr);
    };
    if (n_tokens * cols >= 65536) pool.run(int(n_tokens), one);
    else for (int t = 0; t < int(n_tokens); ++t) one(t, 0);
    return FusedActs{buf.q.data(), buf.d.data(), buf.s.data(), half_sums ? buf.sh.data() : nullptr,
                     offset ? buf.corr.data() : nullptr, cols, nb, nbp};
}

template <class Dot, class F, int R, int T>
void fused_rows(const WeightView& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                int64_t mc) {
    const int64_t rb_bytes = row_bytes(w);
    const auto* wdata = static_cast<const uint8_t*>(w.data);
    mc = std::max<int64_t>(R, mc / R * R);
    const int64_t n_tasks = (w.rows + mc - 1) / mc;
    pool.run(int(n_tasks), [&](int task, int) {
        const int64_t r0 = task * mc, r1 = std::min(w.rows, r0 + mc);
        for (int64_t rbase = r0; rbase < r1; rbase += R) {
            const int rr = int(std::min<int64_t>(R, r1 - rbase));
            const uint8_t* wp[R];
            // Missing rows of a partial block repeat the first row; their results are discarded.
            for (int r = 0; r < R; ++r) wp[r] = wdata + (rbase + (r < rr ? r : 0)) * rb_bytes;
            float out[T * R];
            for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
                const int tt = int(std::min<int64_t>(T, n_tokens - t0));
                fused_dispatch<Dot, F, R, T>(tt, wp, acts, t0, out);
                for (int t = 0; t < tt; ++t)
                    for (int r = 0; r < rr; ++r) y[(t0 + t) * w.rows + rbase + r] = out[t * R + r];
            }
        }
    });
}

template <class Dot, class F>
void fused_matmul_fmt(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                      const GemmTiles& tiles) {
    // Read by every worker, rebuilt per call; thread_local only avoids reallocating each call.
    thread_local FusedBuffers buf;
    const int offset = F::is_signed ? Dot::signed_offset : F::offset;
    const FusedActs acts = quantize_fused(x, n_tokens, w.cols, offset, F::per_half, buf, pool, F::per_half && F::has_min);
    // The register block differs between decode and prefill; the per-output operations do not.
    if (n_tokens == 1) fused_rows<Dot, F, Dot::R1, 1>(w, acts, n_tokens, y, pool, tiles.mc);
    else fused_rows<Dot, F, Dot::R, Dot::T>(w, acts, n_tokens, y, pool, tiles.mc);
}

template <class Dot>
void fused_matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                  const GemmTiles& tiles) {
    switch (w.type) {
        case gguf::GgmlType::Q8_0: return fused_matmul_fmt<Dot, FmtQ8_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_0: return fused_matmul_fmt<Dot, FmtQ4_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_1: return fused_matmul_fmt<Dot, FmtQ4_1>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_0: return fused_matmul_fmt<Dot, FmtQ5_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_1: return fused_matmul_fmt<Dot, FmtQ5_1>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q2_K: return fused_matmul_fmt<Dot, FmtQ2_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q3_K: return fused_matmul_fmt<Dot, FmtQ3_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_K: return fused_matmul_fmt<Dot, FmtQ4_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_K: return fused_matmul_fmt<Dot, FmtQ5_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q6_K: return fused_matmul_fmt<Dot, FmtQ6_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ4_NL: return fused_matmul_fmt<Dot, FmtIQ4_NL>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ4_XS: return fused_matmul_fmt<Dot, FmtIQ4_XS>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::MXFP4: return fused_matmul_fmt<Dot, FmtMXFP4>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_XXS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_XXS, 66>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_XS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_XS, 74>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_S, 82>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ3_XXS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ3_XXS, 98>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ3_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ3_S, 110>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ1_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ1_S, 50>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ1_M: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ1_M, 56>>(w, x, n_tokens, y, pool, tiles);
        default: fail("matmul: no int8 kernel for {}", gguf::type_name(uint32_t(w.type)));
    }
}

}  // namespace
}  // namespace pagoda::kernels::detail
