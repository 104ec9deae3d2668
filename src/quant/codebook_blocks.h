// The GGML weight types whose values are a scale times a small integer taken from a table or grid:
// IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Byte layouts exactly as
// ggml defines them (little-endian, packed):
//   IQ4_NL  (32 values, 18 B): d (f16), qs[16] nibbles as Q4_0; value = d * kvalues_iq4nl[nibble]
//   MXFP4   (32, 17 B): e (E8M0), qs[16] nibbles as Q4_0; value = kvalues_mxfp4[nibble] * 2^(e - 128)
//           (the E2M1 values doubled, so the scale is half of 2^(e - 127); e < 2 gives f32 denormals)
//   IQ4_XS  (256, 136 B): d, scales_h (u16), scales_l[4], qs[128]; sub-block j of 32 has the 6-bit
//           ls = nibble j % 2 of scales_l[j / 2] | bits 2j..2j+1 of scales_h << 4, scale d * (ls - 32),
//           its 16 qs bytes at 16 j as Q4_0's nibbles through kvalues_iq4nl
//   IQ2_XXS (256, 66 B): d, qs as 8 pairs of u32: bytes 0-3 index iq2xxs_grid (8 values each), the
//           second word holds four 7-bit sign indices (bits 7l..) and a 4-bit scale s (bits 28-31);
//           value = d * (0.5 + s) * 0.25 * grid * sign
//   IQ2_XS  (256, 74 B): d, qs u16[32] (9-bit iq2xs_grid index | 7-bit sign index << 9), scales[8]
//           (low nibble: first 16 values of the sub-block, high nibble: last 16), same scale rule
//   IQ2_S   (256, 82 B): d, qs[64] (32 low bytes of iq2s_grid indices, then 32 sign bytes), qh[8] (2
//           high index bits per group of 8), scales[8] as IQ2_XS
//   IQ3_XXS (256, 98 B): d, qs[64] iq3xxs_grid indices (4 values each), then per sub-block a u32 of
//           four 7-bit sign indices and a 4-bit scale s; value = d * (0.5 + s) * 0.5 * grid * sign
//   IQ3_S   (256, 110 B): d, qs[64], qh[8] (ninth index bits), signs[32] (one bit per value),
//           scales[4] (a nibble per sub-block); value = d * (1 + 2 s) * iq3s_grid * sign
//   IQ1_S   (256, 50 B): d, qs[32] (low 8 bits of iq1s_grid indices), qh u16[8] per sub-block: 3
//           high index bits per group of 8, scale s (bits 12-14), delta sign (bit 15);
//           value = d * (2 s + 1) * (grid ± 0.125)
//   IQ1_M   (256, 56 B): qs[32], qh[16] (per group of 8: 3 high index bits and a delta sign bit),
//           scales[8] = 4 u16 holding 3-bit scales per 16 values and, in their top nibbles, the f16 d
// Every one is decoded here per 32-value sub-block into int8 codes c and two scales s (first and
// second 16 values) with value i = s[i / 16] * c[i], bitwise the value ggml dequantises (IQ1's ±0.125
// is folded in as c = 8 grid ± 1, s = d (2 s + 1) / 8: the same exact product, rounded once).
#pragma once
#include <cstdint>
#include <cstring>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

inline constexpr int8_t kValuesIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kValuesMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's E8M0 scale halved: 2^(e - 128) as an f32 (denormal for e < 2).
inline float e8m0_half_to_f32(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000) << e : uint32_t(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

bool is_codebook_type(gguf::GgmlType type);
// The largest |code| the type's codes reach (IQ4: 127, MXFP4: 12, IQ2: 43, IQ3_XXS: 62, IQ3_S: 15,
// IQ1: 9), so a kernel can offset them to unsigned values without wasting range.
int codebook_max_code(gguf::GgmlType type);

// Sub-block j (0 .. values_per_block / 32 - 1) of the block at blk.
void codebook_codes(gguf::GgmlType type, const uint8_t* blk, int j, int8_t codes[32]);
void codebook_scales(gguf::GgmlType type, const uint8_t* blk, int j, float scales[2]);

// Dequantises n values (a multiple of the block size) of a codebook type.
void dequantize_row_codebook(gguf::GgmlType type, const void* blocks, float* out, int64_t n);

}  // namespace pagoda::quant
