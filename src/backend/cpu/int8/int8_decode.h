// Internal: the weight-row decoder of the int8 method (format in int8_operands.h), in a header so each
// ISA kernel file compiles (and auto-vectorises) its own copy with its own flags. Internal linkage.
#pragma once
#include <cstring>

#include "core/half.h"
#include "gguf/ggml_types.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"

namespace pagoda::backend::cpu::detail {
namespace {

inline void set_half(float* sw, float* mh, int64_t b, float sw0, float mh0, float sw1, float mh1) {
    sw[2 * b] = sw0; sw[2 * b + 1] = sw1;
    mh[2 * b] = mh0; mh[2 * b + 1] = mh1;
}

inline void decode_row_local(gguf::GgmlType type, const uint8_t* row, int64_t cols, uint8_t* u, float* sw, float* mh) {
    const int64_t nb = cols / 32;
    switch (type) {
        case gguf::GgmlType::Q8_0: {
            const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(row);
            for (int64_t i = 0; i < nb; ++i) {
                const float d = f16_to_f32(b[i].d);
                for (int j = 0; j < 32; ++j) u[i * 32 + j] = uint8_t(int(b[i].qs[j]) + 128);
                set_half(sw, mh, i, d, -128.f * d, d, -128.f * d);
            }
            return;
        }
        case gguf::GgmlType::Q4_0:
        case gguf::GgmlType::Q4_1: {
            const bool q41 = type == gguf::GgmlType::Q4_1;
            for (int64_t i = 0; i < nb; ++i) {
                const uint8_t* blk = row + i * (q41 ? 20 : 18);
                uint16_t dh, mh16 = 0;
                std::memcpy(&dh, blk, 2);
                if (q41) std::memcpy(&mh16, blk + 2, 2);
                const uint8_t* qs = blk + (q41 ? 4 : 2);
                for (int j = 0; j < 16; ++j) {
                    u[i * 32 + j] = qs[j] & 0x0f;
                    u[i * 32 + 16 + j] = qs[j] >> 4;
                }
                const float d = f16_to_f32(dh);
                const float m = q41 ? f16_to_f32(mh16) : -8.f * d;
                set_half(sw, mh, i, d, m, d, m);
            }
            return;
        }
        case gguf::GgmlType::Q5_0:
        case gguf::GgmlType::Q5_1: {
            const bool q51 = type == gguf::GgmlType::Q5_1;
            for (int64_t i = 0; i < nb; ++i) {
                const uint8_t* blk = row + i * (q51 ? 24 : 22);
                uint16_t dh, mh16 = 0;
                uint32_t qh;
                std::memcpy(&dh, blk, 2);
                if (q51) std::memcpy(&mh16, blk + 2, 2);
                std::memcpy(&qh, blk + (q51 ? 4 : 2), 4);  // little-endian, as the file stores it
                const uint8_t* qs = blk + (q51 ? 8 : 6);
                for (int j = 0; j < 16; ++j) {
                    u[i * 32 + j] = uint8_t((qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
                    u[i * 32 + 16 + j] = uint8_t((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
                }
                const float d = f16_to_f32(dh);
                const float m = q51 ? f16_to_f32(mh16) : -16.f * d;
                set_half(sw, mh, i, d, m, d, m);
            }
            return;
        }
        case gguf::GgmlType::Q2_K:
        case gguf::GgmlType::Q3_K: {
            // 32-block j of a super-block covers the 16-value sub-blocks 2j and 2j+1; its values
            // 32 (j % 4) .. + 31 of half j / 4 take bits 2 (j % 4) of the half's 32 qs bytes.
            const bool q3 = type == gguf::GgmlType::Q3_K;
            for (int64_t sb = 0; sb < nb / 8; ++sb) {
                const uint8_t* blk = row + sb * (q3 ? 110 : 84);
                const uint8_t* qs = blk + (q3 ? 32 : 16);
                uint8_t* ub = u + sb * 256;
                for (int e = 0; e < 256; ++e) {
                    const int h = e / 128, s = (e / 32) % 4, l = e % 32;
                    int q = (qs[32 * h + l] >> (2 * s)) & 3;
                    if (q3) q |= ((blk[l] >> (4 * h + s)) & 1) << 2;  // hmask
                    ub[e] = uint8_t(q);
                }
                uint16_t dh, dminh = 0;
                std::memcpy(&dh, blk + (q3 ? 108 : 80), 2);
                if (!q3) std::memcpy(&dminh, blk + 82, 2);
                const float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
                for (int j = 0; j < 8; ++j) {
                    float s[2], m[2];
                    for (int k = 0; k < 2; ++k) {
                        if (q3) {
                            s[k] = d * float(int(quant::q3_k_scale(2 * j + k, blk + 96)) - 32);
                            m[k] = -4.f * s[k];
                        } else {
                            const uint8_t sc = blk[2 * j + k];
                            s[k] = d * float(sc & 0x0f);
                            m[k] = -(dmin * float(sc >> 4));
                        }
                    }
                    set_half(sw, mh, sb * 8 + j, s[0], m[0], s[1], m[1]);
                }
            }
            return;
        }
        case gguf::GgmlType::Q4_K:
        case gguf::GgmlType::Q5_K: {
            const bool q5 = type == gguf::GgmlType::Q5_K;
            for (int64_t sb = 0; sb < nb / 8; ++sb) {
                const uint8_t* blk = row + sb * (q5 ? 176 : 144);
                uint16_t dh, dminh;
                std::memcpy(&dh, blk, 2);
                std::memcpy(&dminh, blk + 2, 2);
                const uint8_t* scales = blk + 4;
                const uint8_t* qh = q5 ? blk + 16 : nullptr;
                const uint8_t* qs = blk + (q5 ? 48 : 16);
                const float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
                uint8_t* ub = u + sb * 256;
                for (int p = 0; p < 4; ++p) {
                    for (int l = 0; l < 32; ++l) {
                        ub[64 * p + l] = qs[32 * p + l] & 0x0f;
                        ub[64 * p + 32 + l] = qs[32 * p + l] >> 4;
                    }
                    if (q5)
                        for (int l = 0; l < 32; ++l) {
                            ub[64 * p + l] |= uint8_t(((qh[l] >> (2 * p)) & 1) << 4);
                            ub[64 * p + 32 + l] |= uint8_t(((qh[l] >> (2 * p + 1)) & 1) << 4);
                        }
                }
                for (int j = 0; j < 8; ++j) {
                    uint8_t sc, m;
                    quant::k_scale_min(j, scales, sc, m);
                    const float s = d * float(sc), mn = -(dmin * float(m));
                    set_half(sw, mh, sb * 8 + j, s, mn, s, mn);
                }
            }
            return;
        }
        case gguf::GgmlType::Q6_K: {
            for (int64_t sb = 0; sb < nb / 8; ++sb) {
                const auto* blk = reinterpret_cast<const quant::BlockQ6_K*>(row + sb * 210);
                const float d = f16_to_f32(blk->d);
                uint8_t* ub = u + sb * 256;
                for (int h = 0; h < 2; ++h) {
                    const uint8_t* ql = blk->ql + 64 * h;
                    const uint8_t* qh = blk->qh + 32 * h;
                    for (int l = 0; l < 32; ++l) {
                        ub[128 * h + l] = uint8_t((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
                        ub[128 * h + 32 + l] = uint8_t((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
                        ub[128 * h + 64 + l] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                        ub[128 * h + 96 + l] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                    }
                }
                // 32-block j of the super-block covers the 16-value sub-blocks 2j and 2j+1.
                for (int j = 0; j < 8; ++j) {
                    const float s0 = d * float(blk->scales[2 * j]), s1 = d * float(blk->scales[2 * j + 1]);
                    set_half(sw, mh, sb * 8 + j, s0, -32.f * s0, s1, -32.f * s1);
                }
            }
            return;
        }
        default:
            if (quant::is_codebook_type(type)) {
                // Signed int8 codes with a scale per 16 values (quant/codebook_blocks.h): u = c + o with
                // o the type's largest |code|, not 128: the offset term mh * s cancels against o * sum(q)
                // in f32, so a small o keeps small-code types (MXFP4, IQ1-3) accurate.
                const gguf::TypeTraits& t = gguf::type_traits(type);
                const int o = quant::codebook_max_code(type);
                const int subs = int(t.block_size / 32);
                int8_t c[32];
                float s[2];
                for (int64_t b = 0; b < cols / t.block_size; ++b)
                    for (int j = 0; j < subs; ++j) {
                        const uint8_t* blk = row + b * t.type_size;
                        const int64_t i = b * subs + j;
                        quant::codebook_codes(type, blk, j, c);
                        quant::codebook_scales(type, blk, j, s);
                        for (int k = 0; k < 32; ++k) u[i * 32 + k] = uint8_t(int(c[k]) + o);
                        set_half(sw, mh, i, s[0], -float(o) * s[0], s[1], -float(o) * s[1]);
                    }
            }
            return;
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
