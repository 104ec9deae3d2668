// Qwen3-VL's images in the prompt: the tokens its processor expands an image into, and the M-RoPE
// positions (temporal, height, width) of every prompt row, as transformers' get_rope_index computes
// them for images. Rows before the first image are (p, p, p). An image of gh x gw merged tokens
// (row-major) whose first row comes when the next free rotary position is s gets (s, s + row,
// s + column); the rows after it continue from s + max(gh, gw), so rotary positions fall behind
// the KV positions by gh gw - max(gh, gw) per image (model/batch.h keeps both).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::vision {

// <|vision_start|> <|image_pad|> x n <|vision_end|>; the ids come from the text model's vocabulary.
struct Qwen3VlImageTokens {
    int32_t start = -1, end = -1, pad = -1;
};
// Appends one image's tokens to `prompt`; returns the position of its first pad token.
int64_t append_qwen3vl_image(std::vector<int32_t>& prompt, const Qwen3VlImageTokens& ids, int64_t n_tokens);

struct ImagePlacement {
    int64_t first = 0;              // KV position of the image's first row
    int64_t grid_h = 0, grid_w = 0;  // merged tokens per column and per row
};

// 3 values per row for rows [0, n_rows): row r's at 3r. Images in order, not overlapping, each
// inside the rows; throws pagoda::Error otherwise.
std::vector<int32_t> qwen3vl_rope_positions(int64_t n_rows, std::span<const ImagePlacement> images);

// The rotary position of a text row at KV position `position` after all of `images` (which end
// before it): position minus each image's gh gw - max(gh, gw).
int64_t qwen3vl_text_rope_position(int64_t position, std::span<const ImagePlacement> images);

}  // namespace pagoda::vision
