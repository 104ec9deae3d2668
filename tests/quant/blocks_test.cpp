// Dequantisation of hand-built blocks (expected values worked out from the format definitions) and
// quantisation round trips with their error bounds.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant/weight_schemes.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

TEST(QuantBlocks, Q4_0KnownBlock) {
    BlockQ4_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
    float out[32];
    dequantize_row_q4_0(&b, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 0.5f * float(j - 8));
        EXPECT_EQ(out[j + 16], 0.5f * float(7 - j));
    }
}

TEST(QuantBlocks, Q8_0AndQ4_1KnownBlocks) {
    BlockQ8_0 b{};
    b.d = f32_to_f16(0.25f);
    for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(j * 8 - 128);
    float out[32];
    dequantize_row_q8_0(&b, out, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.25f * float(j * 8 - 128));
    BlockQ4_1 c{};
    c.d = f32_to_f16(2.0f);
    c.m = f32_to_f16(-3.0f);
    for (int j = 0; j < 16; ++j) c.qs[j] = uint8_t(0x0f | (1 << 4));
    dequantize_row_q4_1(&c, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 27.0f);
        EXPECT_EQ(out[j + 16], -1.0f);
    }
}

TEST(QuantBlocks, KScalePackingRoundTripsAndMatchesLayout) {
    uint8_t sc[8] = {1, 2, 3, 63, 17, 33, 48, 5}, mn[8] = {62, 0, 9, 31, 32, 16, 1, 63}, packed[12];
    pack_k_scales(sc, mn, packed);
    for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        k_scale_min(j, packed, s, m);
        EXPECT_EQ(s, sc[j]);
        EXPECT_EQ(m, mn[j]);
    }
    // Sub-block 4: low nibbles in byte 8, top bits in bytes 0 (scale) and 4 (min).
    EXPECT_EQ(packed[8], uint8_t((17 & 15) | ((32 & 15) << 4)));
    EXPECT_EQ(packed[0] >> 6, 17 >> 4);
    EXPECT_EQ(packed[4] >> 6, 32 >> 4);
}

TEST(QuantBlocks, Q4_KKnownBlock) {
    BlockQ4_K b{};
    b.d = f32_to_f16(0.5f);
    b.dmin = f32_to_f16(0.25f);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) { sc[j] = uint8_t(j + 1); mn[j] = uint8_t(2 * j); }
    pack_k_scales(sc, mn, b.scales);
    for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) b.qs[32 * p + l] = uint8_t((l % 16) | ((15 - l % 16) << 4));
    std::vector<float> out(256);
    dequantize_row_q4_K(&b, out.data(), 256);
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l) {
            int q = (j % 2 == 0) ? l % 16 : 15 - l % 16;
            EXPECT_EQ(out[size_t(32 * j + l)], 0.5f * float(j + 1) * float(q) - 0.25f * float(2 * j)) << j << " " << l;
        }
}

TEST(QuantBlocks, Q5_KHighBitsAndQ6_KKnownBlock) {
    BlockQ5_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.0f);
    uint8_t sc[8] = {1, 1, 1, 1, 1, 1, 1, 1}, mn[8] = {};
    pack_k_scales(sc, mn, b.scales);
    for (int l = 0; l < 32; ++l) b.qh[l] = uint8_t(1u << (l % 8));  // element l of sub-block l%8 gets +16
    for (int i = 0; i < 128; ++i) b.qs[i] = 0x21;                     // low nibble 1, high nibble 2
    std::vector<float> out(256);
    dequantize_row_q5_K(&b, out.data(), 256);
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l)
            EXPECT_EQ(out[size_t(32 * j + l)], float((j % 2 ? 2 : 1) + (l % 8 == j ? 16 : 0))) << j << " " << l;

    BlockQ6_K c{};
    c.d = f32_to_f16(0.5f);
    for (int i = 0; i < 16; ++i) c.scales[i] = int8_t(i - 8);
    // Every value q = 33 (low nibble 1, high bits 2): (q - 32) = 1, so value = 0.5 * scale of its 16.
    for (int i = 0; i < 128; ++i) c.ql[i] = 0x11;
    for (int i = 0; i < 64; ++i) c.qh[i] = 0xaa;
    dequantize_row_q6_K(&c, out.data(), 256);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(out[size_t(e)], 0.5f * float(e / 16 - 8)) << e;
}

TEST(QuantBlocks, Q4_0QuantiseGolden) {
    // x = -8..7 (twice): the extreme -8 sets d = -8 / -8 = 1, so q = x + 8 exactly.
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = float(i % 16 - 8);
    BlockQ4_0 b;
    quantize_row_q4_0(x, &b, 32);
    EXPECT_EQ(b.d, f32_to_f16(1.0f));
    for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4)));
    // Q8_0: max |x| = 127/64 gives d = 1/64 and q = 64 x exactly.
    float y[32];
    for (int i = 0; i < 32; ++i) y[i] = float(i * 4 - 62) / 64.f;
    y[31] = 127.f / 64.f;
    BlockQ8_0 c;
    quantize_row_q8_0(y, &c, 32);
    EXPECT_EQ(f16_to_f32(c.d), 1.f / 64.f);
    for (int i = 0; i < 31; ++i) EXPECT_EQ(c.qs[i], int8_t(i * 4 - 62));
    EXPECT_EQ(c.qs[31], 127);
}

// Round trip: quantise random rows, dequantise, and bound the error per type.
struct RoundTrip { GgmlType type; double max_rel_rms; };

TEST(QuantBlocks, RoundTripErrorBounds) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t n = 1024;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    // Relative RMS error for Gaussian data: 8-bit ~0.4%, 6-bit ~2%, 4-bit ~10%.
    for (RoundTrip rt : {RoundTrip{GgmlType::Q8_0, 0.006}, RoundTrip{GgmlType::Q6_K, 0.03},
                         RoundTrip{GgmlType::Q4_K, 0.11}, RoundTrip{GgmlType::Q4_1, 0.12},
                         RoundTrip{GgmlType::Q4_0, 0.13}}) {
        std::vector<uint8_t> buf(*gguf::row_size(rt.type, n));
        quantize_row(rt.type, x.data(), buf.data(), n);
        dequantize_row(rt.type, buf.data(), y.data(), n);
        double se = 0, ss = 0;
        for (int64_t i = 0; i < n; ++i) { se += double(x[size_t(i)] - y[size_t(i)]) * (x[size_t(i)] - y[size_t(i)]); ss += double(x[size_t(i)]) * x[size_t(i)]; }
        EXPECT_LT(std::sqrt(se / ss), rt.max_rel_rms) << gguf::type_name(uint32_t(rt.type));
        EXPECT_GT(std::sqrt(se / ss), 0.0) << gguf::type_name(uint32_t(rt.type));
    }
    // Per-element bound for Q8_0: half a step of the block's (f16) scale, plus the scale's rounding.
    std::vector<uint8_t> q8(*gguf::row_size(GgmlType::Q8_0, n));
    quantize_row_q8_0(x.data(), q8.data(), n);
    dequantize_row_q8_0(q8.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        float d = f16_to_f32(reinterpret_cast<const BlockQ8_0*>(q8.data())[b].d);
        for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(x[size_t(b * 32 + i)] - y[size_t(b * 32 + i)]), d * 0.5f + 127.f * d * 1e-3f);
    }
}

TEST(QuantBlocks, ZeroRowsQuantiseToZero) {
    std::vector<float> x(256, 0.f), y(256, 1.f);
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q6_K}) {
        std::vector<uint8_t> buf(*gguf::row_size(t, 256));
        quantize_row(t, x.data(), buf.data(), 256);
        dequantize_row(t, buf.data(), y.data(), 256);
        for (float v : y) EXPECT_EQ(v, 0.f) << gguf::type_name(uint32_t(t));
    }
}

TEST(QuantBlocks, RejectsBadLengthsAndTypes) {
    float x[64] = {};
    uint8_t out[512];
    EXPECT_THROW(quantize_row(GgmlType::Q4_K, x, out, 64), Error);
    EXPECT_THROW(quantize_row(GgmlType::Q2_K, x, out, 256), Error);
    EXPECT_THROW(dequantize_row(GgmlType::Q8_0, out, x, 33), Error);
    EXPECT_THROW(dequantize_row(GgmlType::IQ2_XS, out, x, 256), Error);
}

TEST(WeightSchemes, StoredAsStandardTypesWithBoundedError) {
    std::mt19937 rng(2);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t n = 256;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    for (WeightScheme s : {WeightScheme::int8_per_channel, WeightScheme::int4_g32, WeightScheme::int4_g128}) {
        EXPECT_EQ(scheme_from_name(scheme_name(s)), s);
        GgmlType t = scheme_storage_type(s);
        std::vector<uint8_t> buf(*gguf::row_size(t, n));
        quantize_row_scheme(s, x.data(), buf.data(), n);
        dequantize_row(t, buf.data(), y.data(), n);
        const int64_t g = scheme_group_size(s) ? scheme_group_size(s) : n;
        for (int64_t g0 = 0; g0 < n; g0 += g) {
            float mn = x[size_t(g0)], mx = x[size_t(g0)], amax = 0;
            for (int64_t i = g0; i < g0 + g; ++i) {
                mn = std::min(mn, x[size_t(i)]); mx = std::max(mx, x[size_t(i)]); amax = std::max(amax, std::fabs(x[size_t(i)]));
            }
            // Half a quantisation step (of the f16-rounded scale) plus the f16 rounding of the offset.
            float step = s == WeightScheme::int8_per_channel ? amax / 127.f : (mx - mn) / 15.f;
            float slack = s == WeightScheme::int8_per_channel ? 0.001f * amax : 0.002f * (std::fabs(mn) + (mx - mn));
            for (int64_t i = g0; i < g0 + g; ++i)
                EXPECT_LE(std::fabs(x[size_t(i)] - y[size_t(i)]), 0.5f * step + slack) << scheme_name(s) << " " << i;
        }
        if (s != WeightScheme::int4_g32) {
            // Every 32-block of a group carries the group's parameters.
            const size_t bs = s == WeightScheme::int8_per_channel ? 34 : 20;
            const size_t per_group = size_t(g / 32);
            for (size_t blk = 0; blk < size_t(n / 32); ++blk)
                EXPECT_EQ(std::memcmp(buf.data() + blk * bs, buf.data() + (blk / per_group * per_group) * bs,
                                      s == WeightScheme::int8_per_channel ? 2 : 4), 0);
        }
    }
    EXPECT_THROW(quantize_row_scheme(WeightScheme::int4_g128, x.data(), y.data(), 96), Error);
    std::vector<float> huge(32, 1e10f);
    std::vector<uint8_t> out(40);
    EXPECT_THROW(quantize_row_scheme(WeightScheme::int8_per_channel, huge.data(), out.data(), 32), Error);
    EXPECT_FALSE(scheme_from_name("int3").has_value());
}

}  // namespace
}  // namespace pagoda::quant
