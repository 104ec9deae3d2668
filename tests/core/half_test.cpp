#include "core/half.h"

#include <cmath>
#include <gtest/gtest.h>

namespace pagoda {

TEST(Half, F16RoundTripsEveryValue) {
    for (uint32_t h = 0; h < 65536; ++h) {
        float f = f16_to_f32(f16_bits(h));
        if (std::isnan(f)) continue;
        EXPECT_EQ(f32_to_f16(f), h) << "bits " << h;
    }
}

TEST(Half, F16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
    // 1 + 2^-11 lies exactly between 1 and the next f16; ties go to even (1.0).
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(Half, Bf16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
    EXPECT_EQ(f32_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie -> even
    EXPECT_EQ(f32_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(f32_to_bf16(bits_to_float(0x3f808001u)), 0x3f81);
}

}  // namespace pagoda
