// Test helper: rows of a codebook type (quant/codebook_blocks.h) with random codes and sane scales,
// for the types without a quantiser (IQ1/IQ2/IQ3) and wherever arbitrary codes are wanted: every
// byte random, then the super-block scale d set to a small f16 (IQ1_M: spread over its scale words'
// top nibbles; MXFP4: exponents around 2^-6).
#pragma once
#include <cstdint>
#include <cstring>
#include <random>

#include "core/half.h"
#include "gguf/ggml_types.h"

namespace pagoda::quant::testing {

inline void random_codebook_row(gguf::GgmlType type, int64_t cols, std::mt19937& rng, uint8_t* out) {
    const gguf::TypeTraits& t = gguf::type_traits(type);
    std::uniform_int_distribution<int> byte(0, 255);
    const uint64_t bytes = uint64_t(cols / t.block_size * t.type_size);
    for (uint64_t i = 0; i < bytes; ++i) out[i] = uint8_t(byte(rng));
    for (int64_t b = 0; b < cols / t.block_size; ++b) {
        uint8_t* blk = out + b * t.type_size;
        const uint16_t d = f32_to_f16(0.002f + 0.0005f * float(byte(rng) % 9));
        if (type == gguf::GgmlType::MXFP4) {
            blk[0] = uint8_t(120 + byte(rng) % 5);
        } else if (type == gguf::GgmlType::IQ1_M) {
            for (int k = 0; k < 4; ++k) {
                uint16_t w;
                std::memcpy(&w, blk + 48 + 2 * k, 2);
                w = uint16_t((w & 0x0fff) | (((d >> (4 * k)) & 0x0f) << 12));
                std::memcpy(blk + 48 + 2 * k, &w, 2);
            }
        } else {
            std::memcpy(blk, &d, 2);
        }
    }
}

}  // namespace pagoda::quant::testing
