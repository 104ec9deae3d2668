// Weights repacked at upload into the three layouts the shaders read (shaders/weight.glsl):
//   f32: f32 rows (F32 as stored, BF16 widened exactly);
//   f16: F16 rows as stored;
//   q:   every GGML block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) as int8 codes plus, per
//        group of 16 elements, an f32 (scale, offset): value = code * scale + offset, the products the
//        file's format defines (scale = d * sub-block scale, offset = -dmin * sub-block min or m),
//        so one shader computes every block type. It costs 1.5 bytes per weight (a native-layout
//        kernel per type, reading the file's bytes, is the later step for memory and bandwidth).
// A weight whose parts would need different layouts is widened to f32 (exact for every type).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda::backend::vulkan {

enum class WeightFormat { f32, f16, q };
const char* weight_format_name(WeightFormat f);  // "f32" | "f16" | "q": the shaders' variant suffix

// The layout for one type; throws pagoda::Error naming the tensor, its type and "vulkan backend"
// when the backend cannot compute that type.
WeightFormat weight_format(const MatrixSource& m);

struct Repacked {
    WeightFormat format = WeightFormat::f32;
    std::vector<uint8_t> data;   // rows of all parts, stacked
    std::vector<float> groups;   // q: (scale, offset) per 16 elements
};
Repacked repack(const std::vector<MatrixSource>& parts);

// Decodes one block-type row into codes and per-16 (scale, offset) pairs (exposed for tests).
void repack_block_row(const MatrixSource& m, int64_t row, int8_t* codes, float* groups);

}  // namespace pagoda::backend::vulkan
