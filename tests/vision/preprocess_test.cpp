// SigLIP preprocessing against values worked out by hand from PIL's bilinear filter (triangle of
// support max(in/out, 1), sampled at output pixel centres) and Gemma 3's normalisation
// ((p / 255 - 0.5) / 0.5). The derivations are in the comments beside each expected value.
#include <gtest/gtest.h>
#include <png.h>

#include "core/error.h"
#include "vision/image.h"
#include "vision/image_encode.h"
#include "vision/preprocess.h"
#include "vision/resize.h"

namespace pagoda::test {
namespace {

using vision::Image;

// HF's order of rounding: rescale in float64, cast to float32, normalise in float32.
float siglip(double p) { return (float(p / 255.0) - 0.5f) / 0.5f; }

// 4x4: R varies along x (0, 70, 140, 210), G along y (0, 35, 70, 105), B is 255 everywhere.
Image gradient_4x4() {
    Image im{.width = 4, .height = 4, .rgb = std::vector<uint8_t>(48)};
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
            im.rgb[size_t((y * 4 + x) * 3)] = uint8_t(70 * x);
            im.rgb[size_t((y * 4 + x) * 3 + 1)] = uint8_t(35 * y);
            im.rgb[size_t((y * 4 + x) * 3 + 2)] = 255;
        }
    return im;
}

TEST(SiglipPreprocess, HalvingAveragesWithTheWideTriangle) {
    // 4 -> 2: scale 2, support 2. Output 0: centre 1.0, inputs 0..2, triangle((x - 1 + 0.5) / 2) =
    // 0.75, 0.75, 0.25 -> 3/7, 3/7, 1/7. Output 1: centre 3.0, inputs 1..3 -> 1/7, 3/7, 3/7.
    // R: (0*3 + 70*3 + 140) / 7 = 50 and (70 + 140*3 + 210*3) / 7 = 160; G the same along y:
    // (35*3 + 70) / 7 = 25 and (35 + 70*3 + 105*3) / 7 = 80.
    const Image small = vision::resize_bilinear(gradient_4x4(), 2, 2);
    ASSERT_EQ(small.width, 2);
    const std::vector<uint8_t> want = {50, 25, 255, 160, 25, 255, 50, 80, 255, 160, 80, 255};
    EXPECT_EQ(small.rgb, want);
}

TEST(SiglipPreprocess, GrowingInterpolatesBetweenCentres) {
    // 2 -> 4: scale 0.5, support 1; centres 0.25, 0.75, 1.25, 1.75 give a, .75a + .25b, .25a + .75b, b
    // (the edges clamp to one input). a = 0, b = 200: 0, 50, 150, 200.
    Image two{.width = 2, .height = 1, .rgb = {0, 0, 0, 200, 100, 40}};
    const Image four = vision::resize_bilinear(two, 4, 1);
    const std::vector<uint8_t> want = {0, 0, 0, 50, 25, 10, 150, 75, 30, 200, 100, 40};
    EXPECT_EQ(four.rgb, want);
}

TEST(SiglipPreprocess, FromPngBytesToNormalisedPatches) {
    // The gradient as a PNG, decoded, resized to 2x2, normalised, cut into 1x1 patches.
    std::vector<uint16_t> samples;
    const Image g = gradient_4x4();
    for (uint8_t v : g.rgb) samples.push_back(v);
    const Image decoded = vision::decode_image(encode_png(4, 4, PNG_COLOR_TYPE_RGB, 8, samples), {}, "t");
    const vision::Patches p = vision::siglip_preprocess(decoded, 2, 1, {});
    ASSERT_EQ(p.count(), 4);
    ASSERT_EQ(p.row_size(), 3);
    // patch (y 0, x 1): R 160, G 25, B 255; patch (y 1, x 0): R 50, G 80, B 255.
    EXPECT_FLOAT_EQ(p.rows[3 + 0], siglip(160));  // 0.254902
    EXPECT_FLOAT_EQ(p.rows[3 + 1], siglip(25));   // -0.803922
    EXPECT_FLOAT_EQ(p.rows[3 + 2], 1.0f);
    EXPECT_FLOAT_EQ(p.rows[6 + 0], siglip(50));   // -0.607843
    EXPECT_FLOAT_EQ(p.rows[6 + 1], siglip(80));   // -0.372549
    EXPECT_FLOAT_EQ(p.rows[0], siglip(50));
}

TEST(SiglipPreprocess, PatchRowsAreChannelThenRowThenColumn) {
    // No resize (4 -> 4), 2x2 patches: 4 patches of 12 values, (c, y, x) with x fastest.
    const vision::Patches p = vision::siglip_preprocess(gradient_4x4(), 4, 2, {});
    ASSERT_EQ(p.count(), 4);
    ASSERT_EQ(p.row_size(), 12);
    // patch (py 1, px 0) is row 2; its element (c 1, y 0, x 1) = index 4 + 0 + 1 = 5 is G at pixel
    // (x 1, y 2) = 70; its element (c 0, y 1, x 1) = 3 is R at (x 1, y 3) = 70 too; (c 0, y 0, x 0) of
    // patch (0, 1) is R at x 2 = 140.
    EXPECT_FLOAT_EQ(p.rows[2 * 12 + 5], siglip(70));
    EXPECT_FLOAT_EQ(p.rows[2 * 12 + 3], siglip(70));
    EXPECT_FLOAT_EQ(p.rows[1 * 12 + 0], siglip(140));
    EXPECT_FLOAT_EQ(p.rows[3 * 12 + 4 + 2 + 1], siglip(105));  // patch (1, 1), G at (x 3, y 3)
    EXPECT_FLOAT_EQ(p.rows[3 * 12 + 8], 1.0f);                 // B
}

TEST(SiglipPreprocess, BadSizesAreErrors) {
    EXPECT_THROW(vision::siglip_preprocess(gradient_4x4(), 6, 4, {}), Error);
    EXPECT_THROW(vision::resize_bilinear(gradient_4x4(), 0, 3), Error);
}

}  // namespace
}  // namespace pagoda::test
