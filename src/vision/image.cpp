// Format sniffing and the limits shared by the decoders (see image.h).
#include "vision/image.h"

#include "core/error.h"

namespace pagoda::vision {

const char* image_format_name(ImageFormat f) {
    switch (f) {
        case ImageFormat::png: return "PNG";
        case ImageFormat::jpeg: return "JPEG";
        case ImageFormat::webp: return "WebP";
    }
    return "?";
}

namespace {

bool starts_with(std::span<const uint8_t> bytes, std::string_view magic, size_t at = 0) {
    if (bytes.size() < at + magic.size()) return false;
    for (size_t i = 0; i < magic.size(); ++i)
        if (bytes[at + i] != uint8_t(magic[i])) return false;
    return true;
}

// Formats people send that are not decoded here, so the error can name them.
const char* other_format_name(std::span<const uint8_t> bytes) {
    if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a")) return "GIF";
    if (starts_with(bytes, "BM")) return "BMP";
    if (starts_with(bytes, "II*\0", 0) || starts_with(bytes, std::string_view("MM\0*", 4))) return "TIFF";
    if (starts_with(bytes, "ftypavif", 4) || starts_with(bytes, "ftypheic", 4) || starts_with(bytes, "ftypmif1", 4))
        return "AVIF/HEIF";
    if (starts_with(bytes, "<svg") || starts_with(bytes, "<?xml")) return "SVG";
    return nullptr;
}

}  // namespace

std::optional<ImageFormat> sniff_image_format(std::span<const uint8_t> bytes) {
    if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return ImageFormat::png;
    if (starts_with(bytes, "\xff\xd8\xff")) return ImageFormat::jpeg;
    if (starts_with(bytes, "RIFF") && starts_with(bytes, "WEBP", 8)) return ImageFormat::webp;
    return std::nullopt;
}

void check_image_size(uint64_t width, uint64_t height, const DecodeLimits& limits, std::string_view what,
                      const char* format) {
    if (width == 0 || height == 0) fail("{}: the {} image is empty ({}x{} pixels)", what, format, width, height);
    // Both fit in 32 bits in every format here, so the product cannot overflow 64 bits.
    if (width > 0xffffffffu || height > 0xffffffffu || width * height > limits.max_pixels)
        fail("{}: the {} image is {}x{} pixels, over the limit of {} pixels", what, format, width, height,
             limits.max_pixels);
}

Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what) {
    if (bytes.size() > limits.max_bytes)
        fail("{}: the image is {} bytes, over the limit of {} bytes", what, bytes.size(), limits.max_bytes);
    if (bytes.empty()) fail("{}: the image is empty (0 bytes)", what);
    const auto format = sniff_image_format(bytes);
    if (!format) {
        if (const char* other = other_format_name(bytes))
            fail("{}: {} images are not supported (send PNG, JPEG or WebP)", what, other);
        fail("{}: not a PNG, JPEG or WebP image (unrecognised first bytes)", what);
    }
    switch (*format) {
        case ImageFormat::png: return decode_png(bytes, limits, what);
        case ImageFormat::jpeg: return decode_jpeg(bytes, limits, what);
        case ImageFormat::webp: return decode_webp(bytes, limits, what);
    }
    fail("{}: unknown image format", what);
}

}  // namespace pagoda::vision
