// SigLIP preprocessing (see preprocess.h).
#include "vision/preprocess.h"

#include "core/error.h"
#include "vision/resize.h"

namespace pagoda::vision {

ChannelFirst channel_first_pixels(const Image& image, const ImageNormalization& norm) {
    ChannelFirst out{.width = image.width, .height = image.height,
                     .values = std::vector<float>(size_t(3 * image.width * image.height))};
    for (int c = 0; c < 3; ++c) {
        if (!(norm.std[size_t(c)] > 0)) fail("image normalisation: std[{}] must be positive", c);
        for (int64_t y = 0; y < image.height; ++y)
            for (int64_t x = 0; x < image.width; ++x) {
                const float rescaled = float(double(image.at(x, y, c)) / 255.0);
                out.values[size_t((c * image.height + y) * image.width + x)] =
                    (rescaled - norm.mean[size_t(c)]) / norm.std[size_t(c)];
            }
    }
    return out;
}

Patches patchify(const ChannelFirst& pixels, int64_t patch) {
    if (patch < 1 || pixels.width % patch != 0 || pixels.height % patch != 0)
        fail("patchify: a {}x{} image does not divide into {}x{} patches", pixels.width, pixels.height, patch, patch);
    Patches out{.grid_w = pixels.width / patch, .grid_h = pixels.height / patch, .patch = patch};
    out.rows.reserve(size_t(out.count() * out.row_size()));
    for (int64_t py = 0; py < out.grid_h; ++py)
        for (int64_t px = 0; px < out.grid_w; ++px)
            for (int c = 0; c < 3; ++c)
                for (int64_t y = 0; y < patch; ++y)
                    for (int64_t x = 0; x < patch; ++x) out.rows.push_back(pixels.at(c, py * patch + y, px * patch + x));
    return out;
}

Patches siglip_preprocess(const Image& image, int64_t image_size, int64_t patch, const ImageNormalization& norm) {
    if (image_size < 1 || patch < 1 || image_size % patch != 0)
        fail("SigLIP preprocessing: image size {} is not a positive multiple of the patch size {}", image_size, patch);
    return patchify(channel_first_pixels(resize_bilinear(image, image_size, image_size), norm), patch);
}

}  // namespace pagoda::vision
