// Byte layouts of the GGML block-quantised weight types pagoda computes with, exactly as GGUF files
// store them (little-endian, packed, no padding). A row of n values is n / values_per_block blocks.
//   Q8_0: d (f16) + 32 int8;                         value = d * q
//   Q4_0: d (f16) + 16 bytes; low nibbles are elements 0..15, high nibbles 16..31; value = d * (q - 8)
//   Q4_1: d, m (f16) + 16 bytes of nibbles as Q4_0;  value = d * q + m
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
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
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

}  // namespace pagoda::quant
