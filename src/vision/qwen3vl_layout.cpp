// Qwen3-VL image tokens and M-RoPE positions (see qwen3vl_layout.h).
#include "vision/qwen3vl_layout.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::vision {

int64_t append_qwen3vl_image(std::vector<int32_t>& prompt, const Qwen3VlImageTokens& ids, int64_t n_tokens) {
    if (ids.start < 0 || ids.end < 0 || ids.pad < 0)
        fail("Qwen3-VL image tokens (<|vision_start|>, <|vision_end|>, <|image_pad|>) are missing from the vocabulary");
    if (n_tokens <= 0) fail("an image of {} tokens", n_tokens);
    prompt.push_back(ids.start);
    const auto first = int64_t(prompt.size());
    prompt.insert(prompt.end(), size_t(n_tokens), ids.pad);
    prompt.push_back(ids.end);
    return first;
}

std::vector<int32_t> qwen3vl_rope_positions(int64_t n_rows, std::span<const ImagePlacement> images) {
    std::vector<int32_t> out;
    out.reserve(size_t(3 * n_rows));
    int64_t row = 0, next = 0;  // the next row and the next free rotary position
    auto text_until = [&](int64_t end) {
        for (; row < end; ++row, ++next) out.insert(out.end(), {int32_t(next), int32_t(next), int32_t(next)});
    };
    for (const ImagePlacement& im : images) {
        if (im.grid_h < 1 || im.grid_w < 1 || im.first < row || im.first + im.grid_h * im.grid_w > n_rows)
            fail("image rows [{}, {}) overlap another image or fall outside the {} prompt rows", im.first,
                 im.first + im.grid_h * im.grid_w, n_rows);
        text_until(im.first);
        for (int64_t y = 0; y < im.grid_h; ++y)
            for (int64_t x = 0; x < im.grid_w; ++x, ++row)
                out.insert(out.end(), {int32_t(next), int32_t(next + y), int32_t(next + x)});
        next += std::max(im.grid_h, im.grid_w);
    }
    text_until(n_rows);
    return out;
}

int64_t qwen3vl_text_rope_position(int64_t position, std::span<const ImagePlacement> images) {
    for (const ImagePlacement& im : images) position -= im.grid_h * im.grid_w - std::max(im.grid_h, im.grid_w);
    return position;
}

}  // namespace pagoda::vision
