// WebP (lossy and lossless, still images) through libwebp's one-call decoder into RGB (alpha
// discarded, as for the other formats). Animated WebP is refused: which frame would be meant?
#include <webp/decode.h>

#include "core/error.h"
#include "vision/image.h"

namespace pagoda::vision {

Image decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what) {
    WebPBitstreamFeatures features;
    const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
    if (status == VP8_STATUS_NOT_ENOUGH_DATA) fail("{}: invalid WebP: the file ends early (truncated)", what);
    if (status != VP8_STATUS_OK) fail("{}: invalid WebP: bad header (libwebp status {})", what, int(status));
    if (features.has_animation) fail("{}: animated WebP images are not supported (send one frame)", what);
    if (features.width <= 0 || features.height <= 0) fail("{}: invalid WebP: empty image", what);
    check_image_size(uint64_t(features.width), uint64_t(features.height), limits, what, "WebP");
    const size_t w = size_t(features.width), h = size_t(features.height);
    Image image{.width = int64_t(w), .height = int64_t(h), .rgb = std::vector<uint8_t>(w * h * 3)};
    if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), image.rgb.data(), image.rgb.size(), int(w * 3)))
        fail("{}: invalid WebP: the image data does not decode", what);
    return image;
}

}  // namespace pagoda::vision
