// Qwen-VL preprocessing as transformers' Qwen2VLImageProcessor does it for Qwen3-VL (patch 16,
// merge 2, temporal patch 2): smart_resize picks the size, PIL BICUBIC resizes (resize.h), pixels
// are rescaled by 1/255 and normalised with the projector's mean/std (channel_first_pixels), then
// cut into patches in merge-window order.
// smart_resize (factor = patch x merge): h' = round(h / f) f, w' = round(w / f) f (round half to
// even, as Python's round); if h' w' > max_pixels: b = sqrt(h w / max_pixels), h' = max(f, floor(h /
// b / f) f), same for w'; else if h' w' < min_pixels: b = sqrt(min_pixels / (h w)), h' = ceil(h b / f)
// f, same for w'. An aspect ratio above 200 is refused (as transformers does).
// Row order: the patch grid (gh x gw) in blocks of merge x merge: blocks row-major, the patches of a
// block row-major, so each run of merge^2 rows is one image token; each row (channel, y, x) with x
// fastest. The processor's rows hold the picture twice (the conv3d's two temporal slices); these
// hold it once, and the tower sums the two temporal kernels (the same product).
#pragma once
#include <cstdint>

#include "vision/image.h"
#include "vision/preprocess.h"

namespace pagoda::vision {

struct ResizedSize {
    int64_t width = 0, height = 0;
};
ResizedSize qwen_smart_resize(int64_t width, int64_t height, int64_t factor, int64_t min_pixels, int64_t max_pixels);

// Patches whose grid_w x grid_h are the patch grid (multiples of merge), rows in merge-window order.
Patches qwen3vl_preprocess(const Image& image, int64_t patch, int64_t merge, int64_t min_pixels, int64_t max_pixels,
                           const ImageNormalization& norm);

}  // namespace pagoda::vision
