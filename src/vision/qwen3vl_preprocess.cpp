// Qwen-VL smart resize and merge-ordered patches (see qwen3vl_preprocess.h).
#include "vision/qwen3vl_preprocess.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "vision/resize.h"

namespace pagoda::vision {

ResizedSize qwen_smart_resize(int64_t width, int64_t height, int64_t factor, int64_t min_pixels, int64_t max_pixels) {
    if (width < 1 || height < 1) fail("image resize: an empty {}x{} image", width, height);
    if (factor < 1 || min_pixels < 1 || max_pixels < min_pixels) fail("image resize: bad factor or pixel limits");
    if (double(std::max(width, height)) / double(std::min(width, height)) > 200)
        fail("image of {}x{}: the aspect ratio must be below 200", width, height);
    const double h = double(height), w = double(width), f = double(factor);
    // std::nearbyint rounds half to even under the default rounding mode, like Python's round().
    int64_t hb = int64_t(std::nearbyint(h / f)) * factor, wb = int64_t(std::nearbyint(w / f)) * factor;
    if (hb * wb > max_pixels) {
        const double beta = std::sqrt(h * w / double(max_pixels));
        hb = std::max(factor, int64_t(std::floor(h / beta / f)) * factor);
        wb = std::max(factor, int64_t(std::floor(w / beta / f)) * factor);
    } else if (hb * wb < min_pixels) {
        const double beta = std::sqrt(double(min_pixels) / (h * w));
        hb = int64_t(std::ceil(h * beta / f)) * factor;
        wb = int64_t(std::ceil(w * beta / f)) * factor;
    }
    return {.width = wb, .height = hb};
}

Patches qwen3vl_preprocess(const Image& image, int64_t patch, int64_t merge, int64_t min_pixels, int64_t max_pixels,
                           const ImageNormalization& norm) {
    if (patch < 1 || merge < 1) fail("Qwen-VL preprocessing: patch {} and merge {} must be positive", patch, merge);
    const ResizedSize size = qwen_smart_resize(image.width, image.height, patch * merge, min_pixels, max_pixels);
    const ChannelFirst px = channel_first_pixels(resize_bicubic(image, size.width, size.height), norm);
    Patches out{.grid_w = size.width / patch, .grid_h = size.height / patch, .patch = patch};
    out.rows.reserve(size_t(out.count() * out.row_size()));
    for (int64_t by = 0; by < out.grid_h / merge; ++by)
        for (int64_t bx = 0; bx < out.grid_w / merge; ++bx)
            for (int64_t dy = 0; dy < merge; ++dy)
                for (int64_t dx = 0; dx < merge; ++dx) {
                    const int64_t y0 = (by * merge + dy) * patch, x0 = (bx * merge + dx) * patch;
                    for (int c = 0; c < 3; ++c)
                        for (int64_t y = 0; y < patch; ++y)
                            for (int64_t x = 0; x < patch; ++x) out.rows.push_back(px.at(c, y0 + y, x0 + x));
                }
    return out;
}

}  // namespace pagoda::vision
