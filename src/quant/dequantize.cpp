#include "quant/dequantize.h"

#include <type_traits>

#include "core/error.h"
#include "quant/codebook_blocks.h"
#include "core/half.h"
#include "quant/block_formats.h"

namespace pagoda::quant {

using gguf::GgmlType;

void dequantize_row_q8_0(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) out[i * 32 + j] = d * float(b[i].qs[j]);
    }
}

void dequantize_row_q4_0(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ4_0*>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 16; ++j) {
            out[i * 32 + j] = d * float((b[i].qs[j] & 0x0f) - 8);
            out[i * 32 + j + 16] = d * float((b[i].qs[j] >> 4) - 8);
        }
    }
}

void dequantize_row_q4_1(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ4_1*>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i) {
        float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
        for (int j = 0; j < 16; ++j) {
            out[i * 32 + j] = d * float(b[i].qs[j] & 0x0f) + m;
            out[i * 32 + j + 16] = d * float(b[i].qs[j] >> 4) + m;
        }
    }
}

void dequantize_row_q5_0(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ5_0*>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = f16_to_f32(b[i].d);
        const uint32_t qh = uint32_t(b[i].qh[0]) | uint32_t(b[i].qh[1]) << 8 | uint32_t(b[i].qh[2]) << 16 |
                            uint32_t(b[i].qh[3]) << 24;
        for (int j = 0; j < 16; ++j) {
            const int lo = (b[i].qs[j] & 0x0f) | int((qh >> j) & 1) << 4;
            const int hi = (b[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            out[i * 32 + j] = d * float(lo - 16);
            out[i * 32 + j + 16] = d * float(hi - 16);
        }
    }
}

void dequantize_row_q5_1(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ5_1*>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
        const uint32_t qh = uint32_t(b[i].qh[0]) | uint32_t(b[i].qh[1]) << 8 | uint32_t(b[i].qh[2]) << 16 |
                            uint32_t(b[i].qh[3]) << 24;
        for (int j = 0; j < 16; ++j) {
            const int lo = (b[i].qs[j] & 0x0f) | int((qh >> j) & 1) << 4;
            const int hi = (b[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            out[i * 32 + j] = d * float(lo) + m;
            out[i * 32 + j + 16] = d * float(hi) + m;
        }
    }
}

void dequantize_row_q2_K(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ2_K*>(blocks);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        float* y = out + i * kQK_K;
        for (int e = 0; e < kQK_K; ++e) {
            const int h = e / 128, s = (e / 32) % 4, l = e % 32;
            const int q = (b[i].qs[32 * h + l] >> (2 * s)) & 3;
            const uint8_t sc = b[i].scales[e / 16];
            y[e] = d * float(sc & 0x0f) * float(q) - dmin * float(sc >> 4);
        }
    }
}

void dequantize_row_q3_K(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ3_K*>(blocks);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = f16_to_f32(b[i].d);
        float* y = out + i * kQK_K;
        for (int k = 0; k < 16; ++k) {
            const float dl = d * float(int(q3_k_scale(k, b[i].scales)) - 32);
            for (int e = 16 * k; e < 16 * k + 16; ++e) {
                const int h = e / 128, s = (e / 32) % 4, l = e % 32;
                const int low = (b[i].qs[32 * h + l] >> (2 * s)) & 3;
                const int high = (b[i].hmask[l] >> (4 * h + s)) & 1;
                y[e] = dl * float((low | high << 2) - 4);
            }
        }
    }
}

namespace {

// Q4_K and Q5_K share their super-block: sub-blocks 2p and 2p+1 share 32 bytes of qs (low nibbles
// are 2p, high nibbles 2p+1); Q5_K adds a fifth bit per value, bit 2p (2p+1) of qh[l] for element l
// of sub-block 2p (2p+1). value = d * scale_j * q - dmin * min_j.
template <class Block>
void dequantize_row_k4_or_k5(const void* blocks, float* out, int64_t n) {
    constexpr bool q5 = std::is_same_v<Block, BlockQ5_K>;
    const auto* b = static_cast<const Block*>(blocks);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        float* y = out + i * kQK_K;
        for (int p = 0; p < 4; ++p) {
            const uint8_t* q = b[i].qs + 32 * p;
            uint8_t sc, m;
            k_scale_min(2 * p, b[i].scales, sc, m);
            float d1 = d * float(sc), m1 = dmin * float(m);
            k_scale_min(2 * p + 1, b[i].scales, sc, m);
            float d2 = d * float(sc), m2 = dmin * float(m);
            for (int l = 0; l < 32; ++l) {
                int lo = q[l] & 0x0f, hi = q[l] >> 4;
                if constexpr (q5) {
                    lo |= ((b[i].qh[l] >> (2 * p)) & 1) << 4;
                    hi |= ((b[i].qh[l] >> (2 * p + 1)) & 1) << 4;
                }
                y[64 * p + l] = d1 * float(lo) - m1;
                y[64 * p + 32 + l] = d2 * float(hi) - m2;
            }
        }
    }
}

}  // namespace

void dequantize_row_q4_K(const void* blocks, float* out, int64_t n) { dequantize_row_k4_or_k5<BlockQ4_K>(blocks, out, n); }

void dequantize_row_q5_K(const void* blocks, float* out, int64_t n) { dequantize_row_k4_or_k5<BlockQ5_K>(blocks, out, n); }

void dequantize_row_q6_K(const void* blocks, float* out, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(blocks);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        float d = f16_to_f32(b[i].d);
        float* y = out + i * kQK_K;
        // Each half of 128 values uses 64 bytes of ql and 32 of qh. Element l (< 32) of the four
        // quarters: ql[l] low / ql[l+32] low / ql[l] high / ql[l+32] high nibble, with 2 high bits
        // from qh[l] at shifts 0, 2, 4, 6.
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b[i].ql + 64 * h;
            const uint8_t* qh = b[i].qh + 32 * h;
            const int8_t* sc = b[i].scales + 8 * h;
            for (int l = 0; l < 32; ++l) {
                int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                int is = l / 16;
                y[128 * h + l] = d * float(sc[is]) * float(q1);
                y[128 * h + l + 32] = d * float(sc[is + 2]) * float(q2);
                y[128 * h + l + 64] = d * float(sc[is + 4]) * float(q3);
                y[128 * h + l + 96] = d * float(sc[is + 6]) * float(q4);
            }
        }
    }
}

bool is_supported_block_type(GgmlType type) {
    switch (type) {
        case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1:
        case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q2_K: case GgmlType::Q3_K:
        case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
        default: return is_codebook_type(type);
    }
}

void dequantize_row(GgmlType type, const void* blocks, float* out, int64_t n) {
    if (!is_supported_block_type(type))
        fail("dequantize: weight type {} is not a supported block type", gguf::type_name(uint32_t(type)));
    const int64_t block = gguf::type_traits(type).block_size;
    if (n < 0 || n % block != 0)
        fail("dequantize: {} values is not a multiple of the {} block size {}", n, gguf::type_name(uint32_t(type)), block);
    switch (type) {
        case GgmlType::Q8_0: return dequantize_row_q8_0(blocks, out, n);
        case GgmlType::Q4_0: return dequantize_row_q4_0(blocks, out, n);
        case GgmlType::Q4_1: return dequantize_row_q4_1(blocks, out, n);
        case GgmlType::Q5_0: return dequantize_row_q5_0(blocks, out, n);
        case GgmlType::Q5_1: return dequantize_row_q5_1(blocks, out, n);
        case GgmlType::Q2_K: return dequantize_row_q2_K(blocks, out, n);
        case GgmlType::Q3_K: return dequantize_row_q3_K(blocks, out, n);
        case GgmlType::Q4_K: return dequantize_row_q4_K(blocks, out, n);
        case GgmlType::Q5_K: return dequantize_row_q5_K(blocks, out, n);
        case GgmlType::Q6_K: return dequantize_row_q6_K(blocks, out, n);
        default: return dequantize_row_codebook(type, blocks, out, n);
    }
}

}  // namespace pagoda::quant
