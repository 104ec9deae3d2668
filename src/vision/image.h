// Images in: PNG, JPEG and WebP bytes decoded into 8-bit RGB, as the vision processors take them.
// Contract: decode_image either returns width x height x 3 bytes (row-major, no padding) or throws
// pagoda::Error naming the input (`what`) and the problem; it never crashes on any bytes. Limits are
// checked before the pixels are allocated: the encoded size first, then width x height from the
// header. Conversions, as Hugging Face's processors see an image after PIL's convert("RGB"):
//   grayscale -> R = G = B; palette -> its colours; 16-bit -> the high byte (PIL's 8-bit view);
//   alpha -> dropped, the stored colour kept: transformers' generic convert_to_rgb (which Gemma 3's
//   processor uses) is PIL's convert("RGB"), and llama.cpp's loader asks stb_image for 3 channels,
//   both of which discard alpha. (Idefics2/Mllama's processors composite onto white instead.)
// Refused by name: CMYK/YCCK JPEGs, animated WebP, and every other format (GIF, BMP, TIFF, ...).
// Colour profiles and gamma chunks are ignored, as PIL ignores them; EXIF orientation too.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::vision {

struct Image {
    int64_t width = 0, height = 0;
    std::vector<uint8_t> rgb;  // height rows of width pixels of R, G, B
    uint8_t at(int64_t x, int64_t y, int channel) const { return rgb[size_t((y * width + x) * 3 + channel)]; }
};

struct DecodeLimits {
    uint64_t max_bytes = uint64_t(32) << 20;   // the encoded file
    uint64_t max_pixels = uint64_t(64) << 20;  // width x height
};

enum class ImageFormat { png, jpeg, webp };
const char* image_format_name(ImageFormat f);

// The format from the first bytes (magic numbers), or nullopt.
std::optional<ImageFormat> sniff_image_format(std::span<const uint8_t> bytes);

Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what);

// The three decoders (image_png.cpp, image_jpeg.cpp, image_webp.cpp); decode_image picks one.
Image decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what);
Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what);
Image decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what);

// Checks width x height against the limits (both >= 1); throws naming `what` and the format.
void check_image_size(uint64_t width, uint64_t height, const DecodeLimits& limits, std::string_view what,
                      const char* format);


}  // namespace pagoda::vision
