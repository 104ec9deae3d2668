// Qwen3-VL's interleaved M-RoPE ("IMROPE"): which position axis (temporal, height, width) each rotary
// pair of a head reads. With sections [t, h, w, e] from {arch}.rope.dimension_sections and
// s = pair % (t + h + w + e), as transformers' apply_interleaved_mrope and ggml's IMROPE mode do:
//   axis 1 (height) where s % 3 == 1 and s < 3h; axis 2 (width) where s % 3 == 2 and s < 3w;
//   axis 0 (temporal) otherwise.
// (ggml sends the pairs no section claims to a fourth position, which llama.cpp's mtmd sets to 0 for
// image rows; transformers gives them the temporal position, which this follows.) A text row's axes
// are all its position, so text alone rotates as plain NEOX RoPE does.
#pragma once
#include <cstdint>
#include <vector>

namespace pagoda::model {

// Throws pagoda::Error when the sections are not 1 to 4 non-negative values with a positive sum.
std::vector<uint8_t> imrope_pair_axes(const std::vector<int64_t>& sections, int64_t pairs);

}  // namespace pagoda::model
