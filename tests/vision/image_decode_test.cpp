// Image decoding: every PNG colour type and depth, JPEG gray/RGB, lossless WebP, decoded to the RGB
// values the test put in (exact where the format is lossless, within JPEG's error otherwise), and
// alpha dropped as PIL's convert("RGB") does, and every refusal by name: limits, truncation, CMYK, unsupported formats, data: URL errors.
#include <gtest/gtest.h>
#include <png.h>

#include <string>

#include "core/base64.h"
#include "core/error.h"
#include "vision/data_url.h"
#include "vision/image.h"
#include "vision/image_encode.h"

namespace pagoda::test {
namespace {

using vision::DecodeLimits;
using vision::decode_image;

std::string error_of(std::span<const uint8_t> bytes, const DecodeLimits& limits = {}) {
    try {
        decode_image(bytes, limits, "image 1");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// A 3x2 RGB pattern: distinct values in every channel and pixel.
const std::vector<uint16_t> kRgb = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 250, 0, 255};

void expect_rgb(const vision::Image& im, std::span<const uint16_t> rgb, int tolerance = 0) {
    ASSERT_EQ(im.rgb.size(), rgb.size());
    for (size_t i = 0; i < rgb.size(); ++i) EXPECT_NEAR(int(im.rgb[i]), int(rgb[i]), tolerance) << "byte " << i;
}

TEST(ImageDecode, PngRgb8Exact) {
    const auto png = encode_png(3, 2, PNG_COLOR_TYPE_RGB, 8, kRgb);
    const auto im = decode_image(png, {}, "t");
    EXPECT_EQ(im.width, 3);
    EXPECT_EQ(im.height, 2);
    expect_rgb(im, kRgb);
    EXPECT_EQ(im.at(2, 1, 1), 0);
}

TEST(ImageDecode, PngInterlacedSameAsPlain) {
    const auto im = decode_image(encode_png(3, 2, PNG_COLOR_TYPE_RGB, 8, kRgb, {}, true), {}, "t");
    expect_rgb(im, kRgb);
}

TEST(ImageDecode, Png16BitKeepsTheHighByte) {
    std::vector<uint16_t> wide;
    for (uint16_t v : kRgb) wide.push_back(uint16_t(v << 8 | 0xff));  // a low byte that must not round up
    expect_rgb(decode_image(encode_png(3, 2, PNG_COLOR_TYPE_RGB, 16, wide), {}, "t"), kRgb);
}

TEST(ImageDecode, PngGrayAndLowDepthGray) {
    const std::vector<uint16_t> gray = {0, 7, 128, 255, 1, 200};
    const auto im = decode_image(encode_png(3, 2, PNG_COLOR_TYPE_GRAY, 8, gray), {}, "t");
    for (size_t p = 0; p < gray.size(); ++p)
        for (int c = 0; c < 3; ++c) EXPECT_EQ(im.rgb[p * 3 + size_t(c)], gray[p]);
    // 2-bit gray 0..3 scales to 0, 85, 170, 255.
    const std::vector<uint16_t> two = {0, 1, 2, 3, 3, 0};
    const auto im2 = decode_image(encode_png(3, 2, PNG_COLOR_TYPE_GRAY, 2, two), {}, "t");
    for (size_t p = 0; p < two.size(); ++p) EXPECT_EQ(im2.rgb[p * 3], two[p] * 85);
}

TEST(ImageDecode, PngPaletteMapsIndices) {
    const std::vector<uint8_t> palette = {255, 0, 0, 0, 255, 0, 1, 2, 3};
    const std::vector<uint16_t> idx = {2, 0, 1, 1, 2, 0};
    const auto im = decode_image(encode_png(3, 2, PNG_COLOR_TYPE_PALETTE, 4, idx, palette), {}, "t");
    for (size_t p = 0; p < idx.size(); ++p)
        for (int c = 0; c < 3; ++c) EXPECT_EQ(im.rgb[p * 3 + size_t(c)], palette[idx[p] * 3 + size_t(c)]);
}

TEST(ImageDecode, AlphaIsDroppedKeepingTheStoredColour) {
    // PIL's convert("RGB") (transformers' convert_to_rgb for Gemma 3) and stb_image's 3 channels
    // (llama.cpp) both discard alpha: a transparent pixel keeps its stored colour.
    const std::vector<uint16_t> rgba = {10, 20, 30, 255, 10, 20, 30, 0, 200, 0, 100, 128};
    expect_rgb(decode_image(encode_png(3, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba), {}, "t"),
               std::vector<uint16_t>{10, 20, 30, 10, 20, 30, 200, 0, 100});
    const std::vector<uint16_t> ga = {77, 51};
    expect_rgb(decode_image(encode_png(1, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga), {}, "t"), std::vector<uint16_t>{77, 77, 77});
    std::vector<uint16_t> wide;  // 16-bit RGBA: the high bytes of the colour
    for (uint16_t v : rgba) wide.push_back(uint16_t(v << 8 | 0x80));
    expect_rgb(decode_image(encode_png(3, 1, PNG_COLOR_TYPE_RGB_ALPHA, 16, wide), {}, "t"),
               std::vector<uint16_t>{10, 20, 30, 10, 20, 30, 200, 0, 100});
}

TEST(ImageDecode, JpegRgbAndGrayWithinQuantisationError) {
    std::vector<uint8_t> flat(16 * 16 * 3);
    for (size_t i = 0; i < flat.size(); i += 3) flat[i] = 200, flat[i + 1] = 100, flat[i + 2] = 50;
    const auto im = decode_image(encode_jpeg(16, 16, 3, flat), {}, "t");
    EXPECT_EQ(im.width, 16);
    for (size_t i = 0; i < flat.size(); ++i) EXPECT_NEAR(int(im.rgb[i]), int(flat[i]), 3) << i;
    std::vector<uint8_t> gray(8 * 8, 90);
    const auto g = decode_image(encode_jpeg(8, 8, 1, gray), {}, "t");
    for (size_t p = 0; p < 64; ++p) {
        EXPECT_NEAR(int(g.rgb[p * 3]), 90, 1);
        EXPECT_EQ(g.rgb[p * 3], g.rgb[p * 3 + 2]);
    }
}

TEST(ImageDecode, JpegCmykIsRefusedByName) {
    std::vector<uint8_t> cmyk(8 * 8 * 4, 40);
    EXPECT_EQ(error_of(encode_jpeg(8, 8, 4, cmyk)), "image 1: CMYK/YCCK JPEG images are not supported (convert to RGB)");
}

TEST(ImageDecode, WebpLosslessExactAndAlphaDropped) {
    std::vector<uint8_t> rgb(kRgb.begin(), kRgb.end());
    expect_rgb(decode_image(encode_webp_lossless(3, 2, 3, rgb), {}, "t"), kRgb);
    const std::vector<uint8_t> rgba = {200, 0, 100, 128, 1, 2, 3, 255};  // no alpha-0 pixel: kept exactly
    expect_rgb(decode_image(encode_webp_lossless(2, 1, 4, rgba), {}, "t"), std::vector<uint16_t>{200, 0, 100, 1, 2, 3});
}

TEST(ImageDecode, LimitsAreCheckedBeforeDecoding) {
    const auto png = encode_png(3, 2, PNG_COLOR_TYPE_RGB, 8, kRgb);
    EXPECT_EQ(error_of(png, {.max_bytes = 10}), fmt::format("image 1: the image is {} bytes, over the limit of 10 bytes", png.size()));
    EXPECT_EQ(error_of(png, {.max_pixels = 5}), "image 1: the PNG image is 3x2 pixels, over the limit of 5 pixels");
    std::vector<uint8_t> flat(16 * 16 * 3, 7);
    EXPECT_EQ(error_of(encode_jpeg(16, 16, 3, flat), {.max_pixels = 255}),
              "image 1: the JPEG image is 16x16 pixels, over the limit of 255 pixels");
    EXPECT_EQ(error_of(encode_webp_lossless(16, 16, 3, flat), {.max_pixels = 255}),
              "image 1: the WebP image is 16x16 pixels, over the limit of 255 pixels");
}

TEST(ImageDecode, TruncatedAndCorruptFilesAreErrors) {
    const auto png = encode_png(3, 2, PNG_COLOR_TYPE_RGB, 8, kRgb);
    std::vector<uint8_t> std_jpeg_bytes(16 * 16 * 3, 7);
    const auto jpeg = encode_jpeg(16, 16, 3, std_jpeg_bytes);
    const auto webp = encode_webp_lossless(16, 16, 3, std_jpeg_bytes);
    // A PNG cut after its pixel data (only IEND missing) decodes, as PIL's does; so cut inside IDAT.
    const size_t png_idat_end = png.size() - 12 - 4;
    for (const auto* file : {&png, &jpeg, &webp})
        for (size_t cut : {size_t(20), file->size() / 2, file == &png ? png_idat_end : file->size() - 1}) {
            const std::string e = error_of(std::span(*file).first(cut));
            EXPECT_NE(e.find("image 1: invalid "), std::string::npos) << cut << ": " << e;
        }
    EXPECT_EQ(error_of(std::span(png).first(20)), "image 1: invalid PNG: the file ends early (truncated)");
    auto bad_crc = png;
    bad_crc[29] ^= 0xff;  // inside IHDR: a critical chunk's CRC
    EXPECT_NE(error_of(bad_crc).find("invalid PNG"), std::string::npos);
}

TEST(ImageDecode, OtherFormatsAreNamed) {
    auto bytes = [](std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); };
    EXPECT_EQ(error_of(bytes("GIF89a....")), "image 1: GIF images are not supported (send PNG, JPEG or WebP)");
    EXPECT_EQ(error_of(bytes("BM......")), "image 1: BMP images are not supported (send PNG, JPEG or WebP)");
    EXPECT_EQ(error_of(bytes("hello")), "image 1: not a PNG, JPEG or WebP image (unrecognised first bytes)");
    EXPECT_EQ(error_of({}), "image 1: the image is empty (0 bytes)");
}

TEST(DataUrl, ParsesBase64AndMediaType) {
    const auto d = vision::parse_data_url("data:Image/PNG;name=x.png;base64,aGVsbG8=", 100, "part 0");
    EXPECT_EQ(d.media_type, "image/png");
    EXPECT_EQ(std::string(d.bytes.begin(), d.bytes.end()), "hello");
    const auto unpadded = vision::parse_data_url("data:;base64,aGVsbG8", 100, "p");
    EXPECT_EQ(unpadded.media_type, "");
    EXPECT_EQ(std::string(unpadded.bytes.begin(), unpadded.bytes.end()), "hello");
    EXPECT_EQ(decode_base64("+/8=", "p"), (std::vector<uint8_t>{0xfb, 0xff}));
}

TEST(DataUrl, DecodesAnImage) {
    const auto png = encode_png(3, 2, PNG_COLOR_TYPE_RGB, 8, kRgb);
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    for (size_t i = 0; i < png.size(); i += 3) {
        const size_t n = std::min<size_t>(3, png.size() - i);
        uint32_t v = 0;
        for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? png[i + k] : 0);
        for (size_t k = 0; k < 4; ++k) b64 += k <= n ? alphabet[(v >> (18 - 6 * k)) & 63] : '=';
    }
    expect_rgb(vision::decode_data_url_image("data:image/png;base64," + b64, {}, "part 1"), kRgb);
}

TEST(DataUrl, ErrorsNameTheProblem) {
    auto err = [](std::string_view url, uint64_t max = 1000) {
        try {
            vision::decode_data_url_image(url, {.max_bytes = max}, "messages[0].content[1]");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(err("https://example.com/a.png"), "messages[0].content[1]: expected a data: URL, got a https: URL");
    EXPECT_EQ(err("data:image/png,abc"),
              "messages[0].content[1]: the data: URL is not base64 (';base64,' expected; percent-encoded data is not supported)");
    EXPECT_EQ(err("data:image/png;base64"), "messages[0].content[1]: the data: URL has no ',' before its data");
    EXPECT_EQ(err("data:image/png;base64,aGV*bG8="), "messages[0].content[1]: invalid base64: character '*' at offset 3");
    EXPECT_EQ(err("data:image/png;base64,aGVsb"), "messages[0].content[1]: invalid base64: 5 characters is not a whole number of bytes");
    EXPECT_EQ(err("data:text/plain;base64,aGVsbG8="), "messages[0].content[1]: the data: URL's media type is 'text/plain', not an image/ type");
    EXPECT_EQ(err("data:image/png;base64,aGVsbG8=", 4), "messages[0].content[1]: the data: URL carries 5 bytes, over the limit of 4 bytes");
    EXPECT_EQ(err("data:image/png;base64,aGVsbG8=aGVsbG8=", 100), "messages[0].content[1]: invalid base64: character '=' at offset 7");
}

}  // namespace
}  // namespace pagoda::test
