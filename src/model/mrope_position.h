// M-RoPE rotary positions (Qwen3-VL) of a sequence's rows from its images' places and merged grids,
// as transformers' get_rope_index lays out images: the one rule SequenceRunner and the engine's
// batch builder both read, so a row's rotary position depends only on its KV position and the
// sequence's images (chunking, preemption, forks and prefix-cache hits all give the same). A row
// before every image is (p, p, p); an image of gh x gw merged tokens (row-major) whose first row
// comes when the next free rotary position is s gets (s, s + row, s + column); text after it
// continues from s + max(gh, gw), so rotary positions fall behind KV positions by
// gh gw - max(gh, gw) per earlier image. Images without a grid (grid_h = 0: Gemma 3's) count as text.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

namespace pagoda::model {

// `images`: increasing and disjoint, each with begin, rows, grid_h and grid_w (rows = grid_h x grid_w
// where grid_h > 0); model::ImageSpan and engine::PromptImage both fit.
template <class Image>
std::array<int32_t, 3> mrope_position(int64_t p, std::span<const Image> images) {
    int64_t behind = 0;  // how far text rotary positions fall behind KV positions
    for (const Image& im : images) {
        if (p < im.begin) break;
        if (im.grid_h <= 0) continue;
        const int64_t start = im.begin - behind;
        if (p < im.begin + im.rows) {
            const int64_t r = p - im.begin;
            return {int32_t(start), int32_t(start + r / im.grid_w), int32_t(start + r % im.grid_w)};
        }
        behind += im.rows - std::max(im.grid_h, im.grid_w);
    }
    return {int32_t(p - behind), int32_t(p - behind), int32_t(p - behind)};
}

// Whether any of `images` has a grid: then every row of the sequence carries rotary positions.
template <class Image>
bool has_mrope_grid(std::span<const Image> images) {
    return std::any_of(images.begin(), images.end(), [](const Image& im) { return im.grid_h > 0; });
}

}  // namespace pagoda::model
