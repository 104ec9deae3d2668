#include "quant/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"
#include "quant/codebook_quantize.h"

namespace pagoda::quant {

using gguf::GgmlType;

namespace {

void check_length(GgmlType type, int64_t n) {
    const int64_t block = gguf::type_traits(type).block_size;
    if (n < 0 || n % block != 0)
        fail("quantize: {} values is not a multiple of the {} block size {}", n, gguf::type_name(uint32_t(type)), block);
}

}  // namespace

void quantize_row_q8_0(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ8_0*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::round(x[j] * id));  // half away from zero
    }
}

void quantize_row_q4_0(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_0*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0, max = 0;  // max keeps its sign: the extreme value maps to -8 exactly
        for (int j = 0; j < kQK; ++j)
            if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
        float d = max / -8.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 16; ++j) {
            // Truncation of v + 8.5 rounds half up; 16 can only arise at the clipped end.
            auto q = [&](float v) { return uint8_t(std::min(15, int(int8_t(v * id + 8.5f)))); };
            b[i].qs[j] = uint8_t(q(x[j]) | (q(x[j + 16]) << 4));
        }
    }
}

void quantize_row_q4_1(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_1*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < kQK; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
        float d = (max - min) / 15.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        b[i].m = f32_to_f16(min);
        for (int j = 0; j < 16; ++j) {
            auto q = [&](float v) { return uint8_t(std::min(15, int(int8_t((v - min) * id + 0.5f)))); };
            b[i].qs[j] = uint8_t(q(x[j]) | (q(x[j + 16]) << 4));
        }
    }
}

namespace {

// Q5_0 / Q5_1: the 5-bit codes of a block into nibbles (element j low, j + 16 high) and qh bits.
void pack_q5_codes(const uint8_t q[32], uint8_t qs[16], uint8_t qh[4]) {
    uint32_t bits = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = uint8_t((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        bits |= uint32_t(q[j] >> 4) << j;
        bits |= uint32_t(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; ++k) qh[k] = uint8_t(bits >> (8 * k));
}

}  // namespace

void quantize_row_q5_0(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ5_0*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0, max = 0;  // as Q4_0: the extreme value maps to -16 exactly
        for (int j = 0; j < kQK; ++j)
            if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
        const float d = max / -16.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        uint8_t q[32];
        // Truncation of v + 16.5 rounds half up; 32 can only arise at the clipped end.
        for (int j = 0; j < kQK; ++j) q[j] = uint8_t(std::min(31, int(int8_t(x[j] * id + 16.5f))));
        pack_q5_codes(q, b[i].qs, b[i].qh);
    }
}

void quantize_row_q5_1(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ5_1*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < kQK; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
        const float d = (max - min) / 31.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        b[i].m = f32_to_f16(min);
        uint8_t q[32];
        for (int j = 0; j < kQK; ++j) q[j] = uint8_t(std::min(31, int(uint8_t((x[j] - min) * id + 0.5f))));
        pack_q5_codes(q, b[i].qs, b[i].qh);
    }
}

bool can_quantize(GgmlType type) {
    switch (type) {
        case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
        case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
            return true;
        default: return is_codebook_quantisable(type);
    }
}

void quantize_row(GgmlType type, const float* x, void* out, int64_t n) {
    if (is_codebook_type(type)) return quantize_row_codebook(type, x, nullptr, out, n);  // refuses by name
    if (!can_quantize(type)) fail("quantize: no quantiser for type {}", gguf::type_name(uint32_t(type)));
    check_length(type, n);
    switch (type) {
        case GgmlType::Q8_0: return quantize_row_q8_0(x, out, n);
        case GgmlType::Q4_0: return quantize_row_q4_0(x, out, n);
        case GgmlType::Q4_1: return quantize_row_q4_1(x, out, n);
        case GgmlType::Q5_0: return quantize_row_q5_0(x, out, n);
        case GgmlType::Q5_1: return quantize_row_q5_1(x, out, n);
        case GgmlType::Q2_K: return quantize_row_q2_K(x, out, n);
        case GgmlType::Q3_K: return quantize_row_q3_K(x, out, n);
        case GgmlType::Q4_K: return quantize_row_q4_K(x, out, n);
        case GgmlType::Q5_K: return quantize_row_q5_K(x, out, n);
        case GgmlType::Q6_K: return quantize_row_q6_K(x, out, n);
        default: return quantize_row_codebook(type, x, nullptr, out, n);
    }
}

}  // namespace pagoda::quant
