// SigLIP preprocessing as Gemma 3's image processor does it (transformers' Gemma3ImageProcessor with
// the released preprocessor_config.json: resize to image_size x image_size with PIL's BILINEAR
// (resample 2), rescale by 1/255, normalise with mean 0.5 and std 0.5 per channel, channel-first;
// pan-and-scan off), then cut into the ViT's patches.
// Contract: channel_first_pixels returns 3 x H x W floats, ((p / 255) - mean[c]) / std[c], with p/255
// rounded to float first (numpy's float64 rescale cast to float32, then normalised in float32).
// patchify returns one row per patch, patches in row-major grid order, each row (channel, y, x) with
// x fastest: the order of a PyTorch Conv2d weight [out][in][ky][kx] flattened, so the patch embedding
// is a matmul of these rows by the weight viewed as n_embd rows of 3 * patch * patch.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "vision/image.h"

namespace pagoda::vision {

struct ImageNormalization {
    std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
    std::array<float, 3> std{0.5f, 0.5f, 0.5f};
};

struct ChannelFirst {
    int64_t width = 0, height = 0;
    std::vector<float> values;  // 3 x height x width
    float at(int channel, int64_t y, int64_t x) const { return values[size_t((channel * height + y) * width + x)]; }
};

ChannelFirst channel_first_pixels(const Image& image, const ImageNormalization& norm);

struct Patches {
    int64_t grid_w = 0, grid_h = 0, patch = 0;
    std::vector<float> rows;  // (grid_h * grid_w) rows of 3 * patch * patch
    int64_t count() const { return grid_w * grid_h; }
    int64_t row_size() const { return 3 * patch * patch; }
};

// The image's sides must be multiples of `patch`.
Patches patchify(const ChannelFirst& pixels, int64_t patch);

// Gemma 3 (SigLIP): resize to image_size x image_size, normalise, patchify.
Patches siglip_preprocess(const Image& image, int64_t image_size, int64_t patch, const ImageNormalization& norm);

}  // namespace pagoda::vision
