// Shared helpers of the matmul tests: random weights of every supported type, ISA selection.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "gguf/ggml_types.h"
#include "backend/cpu/matmul/matmul.h"
#include "quant/codebook_blocks.h"
#include "quant/quantize.h"
#include "quant/random_codebook_blocks.h"

namespace pagoda::backend::cpu::testing {

struct RandomWeights {
    gguf::GgmlType type;
    int64_t rows, cols;
    std::vector<uint8_t> bytes;
    WeightView view() const { return {type, bytes.data(), rows, cols}; }
};

inline RandomWeights make_weights(gguf::GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    RandomWeights w{type, rows, cols, {}};
    const uint64_t rb = *gguf::row_size(type, cols);
    w.bytes.resize(size_t(rb * uint64_t(rows)));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = normal(rng) * 0.5f;
        uint8_t* out = w.bytes.data() + r * int64_t(rb);
        switch (type) {
            case gguf::GgmlType::F32: std::memcpy(out, row.data(), rb); break;
            case gguf::GgmlType::F16:
                for (int64_t c = 0; c < cols; ++c) { uint16_t h = f32_to_f16(row[size_t(c)]); std::memcpy(out + 2 * c, &h, 2); }
                break;
            case gguf::GgmlType::BF16:
                for (int64_t c = 0; c < cols; ++c) { uint16_t h = f32_to_bf16(row[size_t(c)]); std::memcpy(out + 2 * c, &h, 2); }
                break;
            case gguf::GgmlType::Q5_K: {
                // No quantiser for Q5_K: random bits with sane f16 scales.
                std::uniform_int_distribution<int> byte(0, 255);
                for (uint64_t i = 0; i < rb; ++i) out[i] = uint8_t(byte(rng));
                for (uint64_t sb = 0; sb < rb / 176; ++sb) {
                    uint16_t d = f32_to_f16(0.002f + 0.001f * float(byte(rng) % 7));
                    uint16_t dmin = f32_to_f16(0.004f);
                    std::memcpy(out + sb * 176, &d, 2);
                    std::memcpy(out + sb * 176 + 2, &dmin, 2);
                }
                break;
            }
            case gguf::GgmlType::Q2_K:
            case gguf::GgmlType::Q3_K: {
                // No quantiser: random codes and scales with sane f16 super-block scales.
                const bool q3 = type == gguf::GgmlType::Q3_K;
                const uint64_t bb = q3 ? 110 : 84;
                std::uniform_int_distribution<int> byte(0, 255);
                for (uint64_t i = 0; i < rb; ++i) out[i] = uint8_t(byte(rng));
                for (uint64_t sb = 0; sb < rb / bb; ++sb) {
                    uint16_t d = f32_to_f16((q3 ? 0.003f : 0.01f) + 0.001f * float(byte(rng) % 7));
                    uint16_t dmin = f32_to_f16(0.006f);
                    std::memcpy(out + sb * bb + (q3 ? 108 : 80), &d, 2);
                    if (!q3) std::memcpy(out + sb * bb + 82, &dmin, 2);
                }
                break;
            }
            default:
                // The IQ1/IQ2/IQ3 grid types have no quantiser: random codes with sane scales.
                if (quant::is_codebook_type(type) && !quant::can_quantize(type))
                    quant::testing::random_codebook_row(type, cols, rng, out);
                else
                    quant::quantize_row(type, row.data(), out, cols);
        }
    }
    return w;
}

inline std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    return x;
}

inline std::vector<Isa> available_isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (int(isa) <= int(best_supported_isa())) out.push_back(isa);
    return out;
}

// Restores the active ISA, quantised and float methods and tiles when a test ends.
struct KernelConfigGuard {
    Isa isa = active_isa();
    QuantMethod method = quant_method();
    FloatMethod fmethod = float_method();
    GemmTiles tiles = gemm_tiles();
    ~KernelConfigGuard() {
        set_isa(isa);
        set_quant_method(method);
        set_float_method(fmethod);
        set_gemm_tiles(tiles);
    }
};

inline bool is_float_type(gguf::GgmlType t) {
    return t == gguf::GgmlType::F32 || t == gguf::GgmlType::F16 || t == gguf::GgmlType::BF16;
}

}  // namespace pagoda::backend::cpu::testing
