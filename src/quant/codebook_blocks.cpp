// Decoding of the codebook weight types (layouts: codebook_blocks.h). Scales are computed with the
// same f32 operations, in the same order, as ggml's dequantisers, so s * c equals ggml's value.
#include "quant/codebook_blocks.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/iq_grids.h"

namespace pagoda::quant {

using gguf::GgmlType;

namespace {

inline float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}
inline uint16_t u16_at(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline uint32_t u32_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// 16 nibble bytes through a 16-entry table: low nibbles are values 0..15, high nibbles 16..31.
void nibble_codes(const uint8_t* qs, const int8_t* table, int8_t* c) {
    for (int i = 0; i < 16; ++i) {
        c[i] = table[qs[i] & 0x0f];
        c[i + 16] = table[qs[i] >> 4];
    }
}

// 8 grid magnitudes with the sign bits applied (bit k set: value k negative).
void signed_group(const uint8_t* grid, uint8_t signs, int8_t* c) {
    for (int k = 0; k < 8; ++k) c[k] = int8_t((signs >> k) & 1 ? -int(grid[k]) : int(grid[k]));
}

// IQ1_M's f16 super-block scale, spread over the top nibbles of its four scale words.
float iq1m_d(const uint8_t* blk) {
    const uint8_t* sc = blk + 48;
    const uint16_t bits = uint16_t((u16_at(sc) >> 12) | ((u16_at(sc + 2) >> 8) & 0x00f0) |
                                   ((u16_at(sc + 4) >> 4) & 0x0f00) | (u16_at(sc + 6) & 0xf000));
    return f16_to_f32(bits);
}

}  // namespace

bool is_codebook_type(GgmlType type) {
    switch (type) {
        case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4: case GgmlType::IQ2_XXS:
        case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S:
        case GgmlType::IQ1_S: case GgmlType::IQ1_M:
            return true;
        default:
            return false;
    }
}

int codebook_max_code(GgmlType type) {
    switch (type) {
        case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: return 127;
        case GgmlType::MXFP4: return 12;
        case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: return 43;
        case GgmlType::IQ3_XXS: return 62;
        case GgmlType::IQ3_S: return 15;
        case GgmlType::IQ1_S: case GgmlType::IQ1_M: return 9;
        default: fail("codebook_max_code: {} is not a codebook type", gguf::type_name(uint32_t(type)));
    }
}

void codebook_codes(GgmlType type, const uint8_t* blk, int j, int8_t c[32]) {
    const IqGrids& g = iq_grids();
    switch (type) {
        case GgmlType::IQ4_NL: return nibble_codes(blk + 2, kValuesIq4nl, c);
        case GgmlType::MXFP4: return nibble_codes(blk + 1, kValuesMxfp4, c);
        case GgmlType::IQ4_XS: return nibble_codes(blk + 8 + 16 * j, kValuesIq4nl, c);
        case GgmlType::IQ2_XXS: {
            const uint8_t* q = blk + 2 + 8 * j;
            const uint32_t signs = u32_at(q + 4);
            for (int l = 0; l < 4; ++l) signed_group(g.iq2xxs[q[l]], iq_sign_bits(signs >> (7 * l)), c + 8 * l);
            return;
        }
        case GgmlType::IQ2_XS:
            for (int l = 0; l < 4; ++l) {
                const uint16_t q = u16_at(blk + 2 + 2 * (4 * j + l));
                signed_group(g.iq2xs[q & 511], iq_sign_bits(q >> 9), c + 8 * l);
            }
            return;
        case GgmlType::IQ2_S: {
            const uint8_t* qs = blk + 2 + 4 * j;
            const uint8_t* signs = blk + 2 + 32 + 4 * j;
            const uint8_t qh = blk[66 + j];
            for (int l = 0; l < 4; ++l) signed_group(g.iq2s[qs[l] | ((qh << (8 - 2 * l)) & 0x300)], signs[l], c + 8 * l);
            return;
        }
        case GgmlType::IQ3_XXS: {
            const uint8_t* qs = blk + 2 + 8 * j;
            const uint32_t aux = u32_at(blk + 2 + 64 + 4 * j);
            for (int l = 0; l < 4; ++l) {
                uint8_t mag[8];
                std::memcpy(mag, g.iq3xxs[qs[2 * l]], 4);
                std::memcpy(mag + 4, g.iq3xxs[qs[2 * l + 1]], 4);
                signed_group(mag, iq_sign_bits(aux >> (7 * l)), c + 8 * l);
            }
            return;
        }
        case GgmlType::IQ3_S: {
            const uint8_t* qs = blk + 2 + 8 * j;
            const uint8_t qh = blk[66 + j];
            const uint8_t* signs = blk + 74 + 4 * j;
            for (int l = 0; l < 4; ++l) {
                uint8_t mag[8];
                std::memcpy(mag, g.iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)], 4);
                std::memcpy(mag + 4, g.iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], 4);
                signed_group(mag, signs[l], c + 8 * l);
            }
            return;
        }
        case GgmlType::IQ1_S: {
            const uint8_t* qs = blk + 2 + 4 * j;
            const uint16_t qh = u16_at(blk + 34 + 2 * j);
            const int delta = qh & 0x8000 ? -1 : 1;
            for (int l = 0; l < 4; ++l) {
                const int8_t* grid = g.iq1s[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int k = 0; k < 8; ++k) c[8 * l + k] = int8_t(8 * grid[k] + delta);
            }
            return;
        }
        case GgmlType::IQ1_M: {
            const uint8_t* qs = blk + 4 * j;
            const uint8_t qh0 = blk[32 + 2 * j], qh1 = blk[32 + 2 * j + 1];
            const int idx[4] = {qs[0] | ((qh0 << 8) & 0x700), qs[1] | ((qh0 << 4) & 0x700),
                                qs[2] | ((qh1 << 8) & 0x700), qs[3] | ((qh1 << 4) & 0x700)};
            const int delta[4] = {qh0 & 0x08 ? -1 : 1, qh0 & 0x80 ? -1 : 1, qh1 & 0x08 ? -1 : 1, qh1 & 0x80 ? -1 : 1};
            for (int l = 0; l < 4; ++l)
                for (int k = 0; k < 8; ++k) c[8 * l + k] = int8_t(8 * g.iq1s[idx[l]][k] + delta[l]);
            return;
        }
        default:
            fail("codebook_codes: {} is not a codebook type", gguf::type_name(uint32_t(type)));
    }
}

void codebook_scales(GgmlType type, const uint8_t* blk, int j, float s[2]) {
    switch (type) {
        case GgmlType::IQ4_NL: s[0] = s[1] = f16_at(blk); return;
        case GgmlType::MXFP4: s[0] = s[1] = e8m0_half_to_f32(blk[0]); return;
        case GgmlType::IQ4_XS: {
            const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | (((u16_at(blk + 2) >> (2 * j)) & 3) << 4);
            s[0] = s[1] = f16_at(blk) * float(ls - 32);
            return;
        }
        case GgmlType::IQ2_XXS: {
            const uint32_t aux = u32_at(blk + 2 + 8 * j + 4);
            s[0] = s[1] = f16_at(blk) * (0.5f + float(aux >> 28)) * 0.25f;
            return;
        }
        case GgmlType::IQ2_XS:
        case GgmlType::IQ2_S: {
            const uint8_t sc = blk[(type == GgmlType::IQ2_XS ? 66 : 74) + j];
            const float d = f16_at(blk);
            s[0] = d * (0.5f + float(sc & 0x0f)) * 0.25f;
            s[1] = d * (0.5f + float(sc >> 4)) * 0.25f;
            return;
        }
        case GgmlType::IQ3_XXS: {
            const uint32_t aux = u32_at(blk + 2 + 64 + 4 * j);
            s[0] = s[1] = f16_at(blk) * (0.5f + float(aux >> 28)) * 0.5f;
            return;
        }
        case GgmlType::IQ3_S: {
            const int sc = (blk[106 + j / 2] >> (4 * (j % 2))) & 0x0f;
            s[0] = s[1] = f16_at(blk) * float(1 + 2 * sc);
            return;
        }
        case GgmlType::IQ1_S: {
            const uint16_t qh = u16_at(blk + 34 + 2 * j);
            s[0] = s[1] = f16_at(blk) * float(2 * ((qh >> 12) & 7) + 1) * 0.125f;
            return;
        }
        case GgmlType::IQ1_M: {
            const float d = iq1m_d(blk);
            const uint16_t sc = u16_at(blk + 48 + 2 * (j / 2));
            s[0] = d * float(2 * ((sc >> (6 * (j % 2))) & 7) + 1) * 0.125f;
            s[1] = d * float(2 * ((sc >> (6 * (j % 2) + 3)) & 7) + 1) * 0.125f;
            return;
        }
        default:
            fail("codebook_scales: {} is not a codebook type", gguf::type_name(uint32_t(type)));
    }
}

void dequantize_row_codebook(GgmlType type, const void* blocks, float* out, int64_t n) {
    const gguf::TypeTraits& t = gguf::type_traits(type);
    const int subs = int(t.block_size / 32);
    const auto* p = static_cast<const uint8_t*>(blocks);
    int8_t c[32];
    float s[2];
    for (int64_t b = 0; b < n / t.block_size; ++b, p += t.type_size)
        for (int j = 0; j < subs; ++j) {
            codebook_codes(type, p, j, c);
            codebook_scales(type, p, j, s);
            float* y = out + b * t.block_size + 32 * j;
            for (int i = 0; i < 32; ++i) y[i] = s[i / 16] * float(c[i]);
        }
}

}  // namespace pagoda::quant
