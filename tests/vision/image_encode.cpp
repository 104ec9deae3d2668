// Test image encoders (see image_encode.h). Test-only code: a libpng/libjpeg error aborts the test run.
#include "vision/image_encode.h"

#include <cstdio>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace pagoda::test {

namespace {

void append(png_structp png, png_bytep data, size_t n) {
    auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
    out->insert(out->end(), data, data + n);
}

int channels_of(int color_type) {
    switch (color_type) {
        case PNG_COLOR_TYPE_GRAY: case PNG_COLOR_TYPE_PALETTE: return 1;
        case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
        case PNG_COLOR_TYPE_RGB: return 3;
        default: return 4;
    }
}

}  // namespace

std::vector<uint8_t> encode_png(int width, int height, int color_type, int bit_depth, std::span<const uint16_t> samples,
                                std::span<const uint8_t> palette, bool interlaced) {
    std::vector<uint8_t> out;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) std::abort();
    png_set_write_fn(png, &out, append, nullptr);
    png_set_IHDR(png, info, png_uint_32(width), png_uint_32(height), bit_depth, color_type,
                 interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    std::vector<png_color> colors;
    for (size_t i = 0; i + 2 < palette.size(); i += 3) colors.push_back({palette[i], palette[i + 1], palette[i + 2]});
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_PLTE(png, info, colors.data(), int(colors.size()));
    png_write_info(png, info);
    const int ch = channels_of(color_type);
    // Pack each row: 16-bit big-endian, 8-bit bytes, or sub-byte depths MSB first.
    const size_t row_bytes = (size_t(width) * size_t(ch) * size_t(bit_depth) + 7) / 8;
    std::vector<uint8_t> row(row_bytes);
    std::vector<std::vector<uint8_t>> rows;
    for (int y = 0; y < height; ++y) {
        std::fill(row.begin(), row.end(), 0);
        for (int i = 0; i < width * ch; ++i) {
            const uint16_t v = samples[size_t(y * width * ch + i)];
            if (bit_depth == 16) {
                row[size_t(i) * 2] = uint8_t(v >> 8);
                row[size_t(i) * 2 + 1] = uint8_t(v);
            } else if (bit_depth == 8) {
                row[size_t(i)] = uint8_t(v);
            } else {
                const size_t bit = size_t(i) * size_t(bit_depth);
                row[bit / 8] |= uint8_t(v << (8 - bit_depth - int(bit % 8)));
            }
        }
        rows.push_back(row);
    }
    std::vector<png_bytep> pointers;
    for (auto& r : rows) pointers.push_back(r.data());
    png_write_image(png, pointers.data());
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    return out;
}

std::vector<uint8_t> encode_jpeg(int width, int height, int components, std::span<const uint8_t> samples) {
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buffer, &size);
    c.image_width = JDIMENSION(width);
    c.image_height = JDIMENSION(height);
    c.input_components = components;
    c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = const_cast<uint8_t*>(samples.data()) + size_t(c.next_scanline) * size_t(width * components);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    std::vector<uint8_t> out(buffer, buffer + size);
    jpeg_destroy_compress(&c);
    std::free(buffer);
    return out;
}

std::vector<uint8_t> encode_webp_lossless(int width, int height, int channels, std::span<const uint8_t> samples) {
    uint8_t* data = nullptr;
    const size_t n = channels == 4 ? WebPEncodeLosslessRGBA(samples.data(), width, height, width * 4, &data)
                                   : WebPEncodeLosslessRGB(samples.data(), width, height, width * 3, &data);
    if (n == 0) throw std::runtime_error("WebP encoding failed");
    std::vector<uint8_t> out(data, data + n);
    WebPFree(data);
    return out;
}

}  // namespace pagoda::test
