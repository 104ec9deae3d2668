// Gemma 4's image preprocessing as transformers' Gemma4ImageProcessor (PIL backend) does it: resize
// keeping the aspect ratio so the patch count fits the soft-token budget, PIL BICUBIC (resize.h),
// rescale by 1/255, normalise with the projector's mean/std (Gemma 4's are 0 and 1: pixels stay in
// [0, 1]; the tower maps them to [-1, 1]), then cut into patches in row-major grid order.
// gemma4v_resized_size (get_aspect_ratio_preserving_size; m = pool x patch, budget = max_soft_tokens
// x pool^2 patches): f = sqrt(budget patch^2 / (h w)); h' = floor(f h / m) m, w' = floor(f w / m) m;
// both 0 is refused; one 0 becomes m and the other min(floor(long / short) m, (budget / pool^2) m);
// a result over the budget is refused. An image already at that size is not resampled.
// Rows: one per patch, (channel, y, x) with x fastest (preprocess.h's patchify).
#pragma once
#include <cstdint>

#include "vision/image.h"
#include "vision/preprocess.h"
#include "vision/qwen3vl_preprocess.h"

namespace pagoda::vision {

ResizedSize gemma4v_resized_size(int64_t width, int64_t height, int64_t patch, int64_t pool, int64_t max_soft_tokens);

// Patches whose grid_w x grid_h are multiples of pool.
Patches gemma4v_preprocess(const Image& image, int64_t patch, int64_t pool, int64_t max_soft_tokens,
                           const ImageNormalization& norm);

}  // namespace pagoda::vision
