// Byte layouts of the GGML block-quantised weight types pagoda computes with, exactly as GGUF files
// store them (little-endian, packed, no padding). A row of n values is n / values_per_block blocks.
//   Q8_0: d (f16) + 32 int8;                         value = d * q
//   Q4_0: d (f16) + 16 bytes; low nibbles are elements 0..15, high nibbles 16..31; value = d * (q - 8)
//   Q4_1: d, m (f16) + 16 bytes of nibbles as Q4_0;  value = d * q + m
//   Q5_0: d (f16) + qh (4 bytes = one little-endian u32) + 16 bytes of nibbles as Q4_0; bit j of qh is
//         the fifth bit of element j, so q = nibble | (bit j) << 4 in 0..31; value = d * (q - 16)
//   Q5_1: d, m (f16) + qh + 16 bytes as Q5_0;        value = d * q + m
//   Q2_K: scales[16] + qs[64] + d, dmin (f16); 256 = 16 sub-blocks of 16, sub-block k has scale byte
//         scales[k] = sc | m << 4 (two 4-bit nibbles). Element e = 128 h + 32 s + l (h < 2, s < 4,
//         l < 32) has q = (qs[32 h + l] >> 2 s) & 3; value = d * sc_k * q - dmin * m_k, k = e / 16
//   Q3_K: hmask[32] + qs[64] + scales[12] + d (f16); 256 = 16 sub-blocks of 16 with 6-bit scales
//         (q3_k_scale). Element e = 128 h + 32 s + l: low bits (qs[32 h + l] >> 2 s) & 3, high bit
//         (hmask[l] >> (4 h + s)) & 1; q = low | high << 2 in 0..7; value = d * (sc_k - 32) * (q - 4)
//   Q4_K: super-block of 256 = 8 sub-blocks of 32 with 6-bit scale and 6-bit min packed in 12 bytes;
//         value = d * sc_j * q - dmin * m_j, q in 0..15
//   Q5_K: as Q4_K plus one high bit per value (qh), q in 0..31
//   Q6_K: 256 = 16 sub-blocks of 16 with int8 scales; q in 0..63 (4 low bits in ql, 2 high in qh);
//         value = d * sc_j * (q - 32)
#pragma once
#include <cstdint>

namespace pagoda::quant {

inline constexpr int kQK = 32;    // values per block of the simple formats
inline constexpr int kQK_K = 256; // values per K-quant super-block

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d; uint16_t dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ6_K) == 2);

// Sub-block j (0..7) of a Q4_K/Q5_K super-block: its 6-bit scale and 6-bit min. The 12 bytes hold
// scales 0..3 and mins 0..3 in the low 6 bits of bytes 0..3 / 4..7; scales and mins 4..7 keep their low
// 4 bits in bytes 8..11 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits
// of bytes 0..3 (scales) and 4..7 (mins).
inline void k_scale_min(int j, const uint8_t* s, uint8_t& scale, uint8_t& min) {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = uint8_t((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        min = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Inverse of k_scale_min for all eight sub-blocks (values must be < 64).
inline void pack_k_scales(const uint8_t scale[8], const uint8_t min[8], uint8_t out[12]) {
    for (int j = 0; j < 12; ++j) out[j] = 0;
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            out[j] = scale[j];
            out[j + 4] = min[j];
        } else {
            out[j + 4] = uint8_t((scale[j] & 0x0f) | ((min[j] & 0x0f) << 4));
            out[j - 4] |= uint8_t((scale[j] >> 4) << 6);
            out[j] |= uint8_t((min[j] >> 4) << 6);
        }
    }
}

// Q3_K's sixteen 6-bit scales (stored + 32) in 12 bytes: the low 4 bits of scale k are nibble k / 8
// (low, then high) of byte k % 8; its top 2 bits are bits 2 (k / 4), 2 (k / 4) + 1 of byte 8 + k % 4.
inline uint8_t q3_k_scale(int k, const uint8_t* s) {
    const int low = (s[k % 8] >> (4 * (k / 8))) & 0x0f;
    const int high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    return uint8_t(low | (high << 4));
}

// Inverse of q3_k_scale for all sixteen (values must be < 64).
inline void pack_q3_k_scales(const uint8_t scale[16], uint8_t out[12]) {
    for (int j = 0; j < 12; ++j) out[j] = 0;
    for (int k = 0; k < 16; ++k) {
        out[k % 8] |= uint8_t((scale[k] & 0x0f) << (4 * (k / 8)));
        out[8 + k % 4] |= uint8_t((scale[k] >> 4) << (2 * (k / 4)));
    }
}

}  // namespace pagoda::quant
