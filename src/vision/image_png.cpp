// PNG through libpng's progressive-free low-level API (not the simplified one: that treats 16-bit
// samples as linear light and would gamma-convert them, where PIL keeps the high byte). libpng
// reports errors by longjmp, so the two calls that can fail keep only plain data in their frames and
// turn a jump into a message; the C++ side throws it.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "vision/image.h"

namespace pagoda::vision {

namespace {

struct PngReader {
    png_structp png = nullptr;
    png_infop info = nullptr;
    const uint8_t* data = nullptr;
    size_t size = 0, at = 0;
    char message[200] = {};
};

void on_error(png_structp png, png_const_charp msg) {
    auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
    std::snprintf(r->message, sizeof r->message, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}  // a bad CRC in an ancillary chunk etc.: not fatal

void on_read(png_structp png, png_bytep out, size_t n) {
    auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
    if (n > r->size - r->at) png_error(png, "the file ends early (truncated)");
    std::memcpy(out, r->data + r->at, n);
    r->at += n;
}

// Reads the header and sets the transforms to 8-bit RGB; false (with r.message) on a libpng error.
bool read_header(PngReader& r, png_uint_32& width, png_uint_32& height) {
    if (setjmp(png_jmpbuf(r.png))) return false;
    png_set_read_fn(r.png, &r, on_read);
    // A decompression bomb is caught by the pixel limit; cap the chunk sizes libpng will buffer too.
    png_set_chunk_malloc_max(r.png, 8u << 20);
    png_read_info(r.png, r.info);
    width = png_get_image_width(r.png, r.info);
    height = png_get_image_height(r.png, r.info);
    const int color = png_get_color_type(r.png, r.info);
    png_set_expand(r.png);  // palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha
    png_set_strip_16(r.png);  // the high byte, as PIL's 8-bit view
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(r.png);
    png_set_strip_alpha(r.png);  // PIL's convert("RGB"): the stored colour, alpha discarded
    png_set_interlace_handling(r.png);
    png_read_update_info(r.png, r.info);
    if (png_get_rowbytes(r.png, r.info) != size_t(width) * 3) png_error(r.png, "unexpected row layout after transforms");
    return true;
}

bool read_rows(PngReader& r, png_bytepp rows) {
    if (setjmp(png_jmpbuf(r.png))) return false;
    png_read_image(r.png, rows);
    return true;
}

}  // namespace

Image decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits, std::string_view what) {
    PngReader r;
    r.data = bytes.data();
    r.size = bytes.size();
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_error, on_warning);
    if (!r.png) fail("{}: libpng could not start", what);
    r.info = png_create_info_struct(r.png);
    struct Cleanup {
        PngReader& r;
        ~Cleanup() { png_destroy_read_struct(&r.png, r.info ? &r.info : nullptr, nullptr); }
    } cleanup{r};
    if (!r.info) fail("{}: libpng could not start", what);
    png_uint_32 width = 0, height = 0;
    if (!read_header(r, width, height)) fail("{}: invalid PNG: {}", what, r.message);
    check_image_size(width, height, limits, what, "PNG");
    Image image{.width = int64_t(width), .height = int64_t(height), .rgb = std::vector<uint8_t>(size_t(width) * height * 3)};
    std::vector<png_bytep> rows(height);
    for (png_uint_32 y = 0; y < height; ++y) rows[y] = image.rgb.data() + size_t(y) * width * 3;
    if (!read_rows(r, rows.data())) fail("{}: invalid PNG: {}", what, r.message);
    return image;
}

}  // namespace pagoda::vision
