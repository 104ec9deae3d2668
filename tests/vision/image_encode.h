// Test images made in memory with the same Debian libraries the decoders use, in the exact forms a
// test needs (a PNG colour type and bit depth, a grayscale or CMYK JPEG, a lossless WebP), so the
// decoders' conversions can be checked against pixel values the test chose.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::test {

// PNG of `color_type` (PNG_COLOR_TYPE_*) and `bit_depth`; samples holds width x height x channels
// values (16-bit depths take values up to 65535). A palette PNG takes `palette` (RGB triples) and
// samples as indices.
std::vector<uint8_t> encode_png(int width, int height, int color_type, int bit_depth, std::span<const uint16_t> samples,
                                std::span<const uint8_t> palette = {}, bool interlaced = false);

// JPEG at quality 100 of `components` (1 gray, 3 RGB, 4 CMYK) samples.
std::vector<uint8_t> encode_jpeg(int width, int height, int components, std::span<const uint8_t> samples);

// Lossless WebP of RGB (channels 3) or RGBA (channels 4) samples.
std::vector<uint8_t> encode_webp_lossless(int width, int height, int channels, std::span<const uint8_t> samples);

}  // namespace pagoda::test
