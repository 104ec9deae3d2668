// Gemma 4's aspect-preserving resize and patches (see gemma4v_preprocess.h).
#include "vision/gemma4v_preprocess.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "vision/resize.h"

namespace pagoda::vision {

ResizedSize gemma4v_resized_size(int64_t width, int64_t height, int64_t patch, int64_t pool, int64_t max_soft_tokens) {
    if (width < 1 || height < 1) fail("image resize: an empty {}x{} image", width, height);
    if (patch < 1 || pool < 1 || max_soft_tokens < 1)
        fail("Gemma 4 preprocessing: patch {}, pool {} and budget {} must be positive", patch, pool, max_soft_tokens);
    const int64_t max_patches = max_soft_tokens * pool * pool, side = pool * patch;
    const double target_px = double(max_patches) * double(patch * patch);
    const double factor = std::sqrt(target_px / (double(height) * double(width)));
    int64_t h = int64_t(std::floor(factor * double(height) / double(side))) * side;
    int64_t w = int64_t(std::floor(factor * double(width) / double(side))) * side;
    if (h == 0 && w == 0) fail("image of {}x{}: resizing it for Gemma 4 gives 0x0", width, height);
    const int64_t max_side = (max_patches / (pool * pool)) * side;
    if (h == 0) {
        h = side;
        w = std::min((width / height) * side, max_side);
    } else if (w == 0) {
        w = side;
        h = std::min((height / width) * side, max_side);
    }
    if (double(h) * double(w) > target_px)
        fail("image of {}x{}: the {}x{} resize is over the {}-patch budget", width, height, w, h, max_patches);
    return {.width = w, .height = h};
}

Patches gemma4v_preprocess(const Image& image, int64_t patch, int64_t pool, int64_t max_soft_tokens,
                           const ImageNormalization& norm) {
    const ResizedSize size = gemma4v_resized_size(image.width, image.height, patch, pool, max_soft_tokens);
    if (size.width == image.width && size.height == image.height) return patchify(channel_first_pixels(image, norm), patch);
    return patchify(channel_first_pixels(resize_bicubic(image, size.width, size.height), norm), patch);
}

}  // namespace pagoda::vision
