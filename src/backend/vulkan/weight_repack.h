// Weights repacked at upload into the three layouts the shaders read (shaders/weight.glsl):
//   f32: f32 rows (F32 as stored, BF16 widened exactly);
//   f16: F16 rows as stored;
//   native (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4 and the
//        grid types iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, whose grid from
//        quant/iq_grids.h rides along as `grid`, a few KiB): the file's own blocks as
//        stored, so a weight takes the file's bytes on the device (plus at most 3 bytes of padding
//        to a 32-bit word); the shader variant of that type decodes them (shaders/weight.glsl);
//   q:   the grouped layout: any GGML block type as int8 codes plus, per group of 16 elements, an
//        f32 (scale, offset): value = code * scale + offset, the products the file's format defines
//        (scale = d * sub-block scale, offset = -dmin * sub-block min or m). 1.5 bytes per weight.
//        The codebook types' codes come from quant/codebook_blocks.h on the host (offset 0).
//        Used for a weight whose parts have different block types (a fused Q4_K|Q6_K weight), or
//        for every block type when PAGODA_VULKAN_WEIGHTS=grouped (the tests compare both layouts:
//        a native variant reads bitwise the value the grouped one does).
// A weight whose parts would need different layouts otherwise is widened to f32 (exact for every type).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda::backend::vulkan {

enum class WeightFormat { f32, f16, q, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k,
                          iq4_nl, iq4_xs, mxfp4, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m };
// "f32" | "f16" | "q" | "q4_0" ...: the shaders' variant suffix.
const char* weight_format_name(WeightFormat f);
// True for the formats that hold a block type's file bytes as stored.
bool is_native(WeightFormat f);

// The layout for one type; throws pagoda::Error naming the tensor, its type and "vulkan backend"
// when the backend cannot compute that type.
WeightFormat weight_format(const MatrixSource& m);

struct Repacked {
    WeightFormat format = WeightFormat::f32;
    std::vector<uint8_t> data;   // rows of all parts, stacked
    std::vector<float> groups;   // q: (scale, offset) per 16 elements
    std::vector<uint8_t> grid;   // a grid type's grid (read at the weight's groups address)
};
Repacked repack(const std::vector<MatrixSource>& parts);

// Decodes one block-type row into codes and per-16 (scale, offset) pairs (exposed for tests).
void repack_block_row(const MatrixSource& m, int64_t row, int8_t* codes, float* groups);

}  // namespace pagoda::backend::vulkan
