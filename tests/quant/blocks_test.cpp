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

TEST(QuantBlocks, Q5_0AndQ5_1KnownBlocks) {
    // qh bytes 55 55 aa aa: bits 0, 2, .., 14 and 17, 19, .., 31 set, i.e. the fifth bit of even
    // elements 0..14 and of odd elements 17..31.
    const uint8_t qh[4] = {0x55, 0x55, 0xaa, 0xaa};
    BlockQ5_0 b{};
    b.d = f32_to_f16(0.5f);
    std::memcpy(b.qh, qh, 4);
    for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
    float out[32];
    dequantize_row_q5_0(&b, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 0.5f * float(j + (j % 2 == 0 ? 16 : 0) - 16)) << j;
        EXPECT_EQ(out[j + 16], 0.5f * float(15 - j + (j % 2 == 1 ? 16 : 0) - 16)) << j;
    }
    EXPECT_EQ(out[0], 0.0f);     // q = 0 | 16
    EXPECT_EQ(out[1], -7.5f);    // q = 1
    EXPECT_EQ(out[17], 7.0f);    // q = 14 | 16
    EXPECT_EQ(out[16], -0.5f);   // q = 15
    BlockQ5_1 c{};
    c.d = f32_to_f16(2.0f);
    c.m = f32_to_f16(-3.0f);
    std::memcpy(c.qh, qh, 4);
    for (int j = 0; j < 16; ++j) c.qs[j] = uint8_t(j | ((15 - j) << 4));
    dequantize_row_q5_1(&c, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 2.0f * float(j + (j % 2 == 0 ? 16 : 0)) - 3.0f) << j;
        EXPECT_EQ(out[j + 16], 2.0f * float(15 - j + (j % 2 == 1 ? 16 : 0)) - 3.0f) << j;
    }
    EXPECT_EQ(out[31], 2.0f * 16 - 3.0f);  // element 31: nibble 0, bit 31 set
}

TEST(QuantBlocks, Q2_KKnownBlock) {
    BlockQ2_K b{};
    b.d = f32_to_f16(0.5f);
    b.dmin = f32_to_f16(0.25f);
    // Sub-block k (16 values): scale k + 1 (mod 16), min k % 5.
    for (int k = 0; k < 16; ++k) b.scales[k] = uint8_t(((k + 1) % 16) | ((k % 5) << 4));
    // Byte 0 holds the codes of elements 0, 32, 64, 96 (bits 0-1, 2-3, 4-5, 6-7): 1, 2, 3, 0.
    b.qs[0] = 0b00111001;
    // Byte 32 + 20 holds elements 128 + 20, 160 + 20, 192 + 20, 224 + 20: 3, 3, 0, 1.
    b.qs[52] = 0b01001111;
    std::vector<float> out(256);
    dequantize_row_q2_K(&b, out.data(), 256);
    auto value = [](int k, int q) { return 0.5f * float((k + 1) % 16) * float(q) - 0.25f * float(k % 5); };
    EXPECT_EQ(out[0], 0.5f * 1 * 1 - 0.f);          // sub-block 0
    EXPECT_EQ(out[32], 0.5f * 3 * 2 - 0.25f * 2);    // sub-block 2
    EXPECT_EQ(out[64], 0.5f * 5 * 3 - 0.25f * 4);    // sub-block 4
    EXPECT_EQ(out[96], 0.f - 0.25f * 1);             // sub-block 6, code 0
    EXPECT_EQ(out[148], 0.5f * 10 * 3 - 0.25f * 4);  // sub-block 9
    EXPECT_EQ(out[180], 0.5f * 12 * 3 - 0.25f * 1);  // sub-block 11
    EXPECT_EQ(out[212], 0.f - 0.25f * 3);            // sub-block 13, code 0
    EXPECT_EQ(out[244], 0.5f * 0 * 1 - 0.25f * 0);   // sub-block 15 (scale 16 % 16 = 0)
    for (int e = 0; e < 256; ++e) {
        if (e == 0 || e == 32 || e == 64 || e == 96 || e == 148 || e == 180 || e == 212 || e == 244) continue;
        EXPECT_EQ(out[size_t(e)], value(e / 16, 0)) << e;
    }
}

TEST(QuantBlocks, Q3_KScalePackingMatchesLayout) {
    uint8_t sc[16], packed[12];
    for (int k = 0; k < 16; ++k) sc[k] = uint8_t((k * 23 + 5) % 64);
    sc[13] = 0b101101;
    sc[2] = 0b011010;
    pack_q3_k_scales(sc, packed);
    for (int k = 0; k < 16; ++k) EXPECT_EQ(q3_k_scale(k, packed), sc[k]) << k;
    // Scale 13: low nibble 1101 in the high nibble of byte 5, top bits 10 in bits 6-7 of byte 9.
    EXPECT_EQ(packed[5] >> 4, 0b1101);
    EXPECT_EQ(packed[9] >> 6, 0b10);
    // Scale 2: low nibble 1010 in the low nibble of byte 2, top bits 01 in bits 0-1 of byte 10.
    EXPECT_EQ(packed[2] & 15, 0b1010);
    EXPECT_EQ(packed[10] & 3, 0b01);
}

TEST(QuantBlocks, Q3_KKnownBlock) {
    BlockQ3_K b{};
    b.d = f32_to_f16(0.25f);
    uint8_t sc[16];
    for (int k = 0; k < 16; ++k) sc[k] = uint8_t(32 + k - 8);  // signed scale k - 8
    pack_q3_k_scales(sc, b.scales);
    // Without any hmask bit every code is low - 4. Element 0: low bits 3 (qs[0] bits 0-1), high bit
    // set (hmask[0] bit 0): q = 7 - 4 = 3. Element 32: low 0 (qs[0] bits 2-3), no high bit: -4.
    // Element 128 + 32 * 3 + 5 = 229: low bits from qs[32 + 5] bits 6-7 = 2, high bit hmask[5] bit 7.
    // Element 133: qs[37] bits 0-1 = 1, hmask[5] bit 4 clear: 1 - 4 = -3.
    b.qs[0] = 0b00000011;
    b.hmask[0] = 0b00000001;
    b.qs[37] = 0b10000001;
    b.hmask[5] = 0b10000000;
    std::vector<float> out(256);
    dequantize_row_q3_K(&b, out.data(), 256);
    EXPECT_EQ(out[0], 0.25f * float(0 - 8) * 3.f);
    EXPECT_EQ(out[32], 0.25f * float(2 - 8) * -4.f);
    EXPECT_EQ(out[229], 0.25f * float(14 - 8) * 2.f);
    EXPECT_EQ(out[133], 0.25f * float(8 - 8) * -3.f);
    for (int e = 0; e < 256; ++e) {
        if (e == 0 || e == 229 || e == 133) continue;
        EXPECT_EQ(out[size_t(e)], 0.25f * float(e / 16 - 8) * -4.f) << e;
    }
}

TEST(QuantBlocks, Q5_0QuantiseGolden) {
    // x = -16..15: the extreme -16 sets d = -16 / -16 = 1, so q = x + 16 exactly.
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = float(i - 16);
    BlockQ5_0 b;
    quantize_row_q5_0(x, &b, 32);
    EXPECT_EQ(b.d, f32_to_f16(1.0f));
    for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;  // codes j and j + 16
    const uint8_t qh[4] = {0, 0, 0xff, 0xff};  // elements 16..31 have codes >= 16
    EXPECT_EQ(std::memcmp(b.qh, qh, 4), 0);
    // Q5_1: min 1, max 32 gives d = 1 and m = 1, so q = x - 1.
    for (int i = 0; i < 32; ++i) x[i] = float(32 - i);
    BlockQ5_1 c;
    quantize_row_q5_1(x, &c, 32);
    EXPECT_EQ(c.d, f32_to_f16(1.0f));
    EXPECT_EQ(c.m, f32_to_f16(1.0f));
    for (int j = 0; j < 16; ++j) EXPECT_EQ(c.qs[j], uint8_t(((31 - j) & 15) | ((15 - j) << 4))) << j;
    const uint8_t qh1[4] = {0xff, 0xff, 0, 0};
    EXPECT_EQ(std::memcmp(c.qh, qh1, 4), 0);
}

TEST(QuantBlocks, Q5QuantiseElementBounds) {
    // Every element within half a step of its block's (f16) scale; Q5_0's one clipped end (the
    // opposite extreme of the max-magnitude value, code 32 -> 31) within a whole step.
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t n = 2048;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    std::vector<uint8_t> q5(*gguf::row_size(GgmlType::Q5_0, n));
    quantize_row_q5_0(x.data(), q5.data(), n);
    dequantize_row_q5_0(q5.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = std::fabs(f16_to_f32(reinterpret_cast<const BlockQ5_0*>(q5.data())[b].d));
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(b * 32 + i)]));
        for (int i = 0; i < 32; ++i) {
            const float v = x[size_t(b * 32 + i)], err = std::fabs(v - y[size_t(b * 32 + i)]);
            const bool clipped = std::fabs(v) / amax * 16.f > 15.5f;
            EXPECT_LE(err, (clipped ? 1.0f : 0.5f) * d + 2e-3f * amax) << b << " " << i;
        }
    }
    std::vector<uint8_t> q51(*gguf::row_size(GgmlType::Q5_1, n));
    quantize_row_q5_1(x.data(), q51.data(), n);
    dequantize_row_q5_1(q51.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(reinterpret_cast<const BlockQ5_1*>(q51.data())[b].d);
        float mn = x[size_t(b * 32)], mx = mn;
        for (int i = 0; i < 32; ++i) { mn = std::min(mn, x[size_t(b * 32 + i)]); mx = std::max(mx, x[size_t(b * 32 + i)]); }
        for (int i = 0; i < 32; ++i)
            EXPECT_LE(std::fabs(x[size_t(b * 32 + i)] - y[size_t(b * 32 + i)]), 0.5f * d + 2e-3f * (std::fabs(mn) + mx - mn))
                << b << " " << i;
    }
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
    // Relative RMS error for Gaussian data: 8-bit ~0.4%, 6-bit ~2%, 5-bit ~4%, 4-bit ~8%, 3-bit ~15%,
    // 2-bit ~30%.
    for (RoundTrip rt : {RoundTrip{GgmlType::Q8_0, 0.006}, RoundTrip{GgmlType::Q6_K, 0.03},
                         RoundTrip{GgmlType::Q5_1, 0.045}, RoundTrip{GgmlType::Q5_0, 0.05},
                         RoundTrip{GgmlType::Q3_K, 0.17}, RoundTrip{GgmlType::Q2_K, 0.33},
                         RoundTrip{GgmlType::Q4_K, 0.11}, RoundTrip{GgmlType::Q4_1, 0.12},
                         RoundTrip{GgmlType::Q5_K, 0.04},
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

// Q5_K's layout written by the quantiser, checked byte by byte against the format (block_formats.h)
// and through the dequantiser: each sub-block holds a different permutation of the codes 0..31
// shifted by -5, a grid the fit reproduces exactly (scale 1, min -5), so every code is known.
TEST(QuantBlocks, Q5_KQuantiseWritesTheDequantisersLayout) {
    float x[256];
    uint8_t code[256];
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l) {
            code[32 * j + l] = uint8_t((l * (2 * j + 3) + 5 * j) % 32);  // odd multiplier: a permutation
            x[32 * j + l] = float(code[32 * j + l]) - 5.f;
        }
    BlockQ5_K b;
    quantize_row_q5_K(x, &b, 256);
    EXPECT_EQ(b.d, f32_to_f16(1.f / 63.f));
    EXPECT_EQ(b.dmin, f32_to_f16(5.f / 63.f));
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k_scale_min(j, b.scales, sc, m);
        EXPECT_EQ(sc, 63) << j;
        EXPECT_EQ(m, 63) << j;
    }
    for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) {
            const uint8_t lo = code[64 * p + l], hi = code[64 * p + 32 + l];
            EXPECT_EQ(b.qs[32 * p + l], uint8_t((lo & 15) | (hi & 15) << 4)) << p << " " << l;
            EXPECT_EQ((b.qh[l] >> (2 * p)) & 1, lo >> 4) << p << " " << l;
            EXPECT_EQ((b.qh[l] >> (2 * p + 1)) & 1, hi >> 4) << p << " " << l;
        }
    float y[256];
    dequantize_row_q5_K(&b, y, 256);
    const float d = f16_to_f32(b.d) * 63.f, m = f16_to_f32(b.dmin) * 63.f;
    for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(y[e], d * float(code[e]) - m) << e;  // the very codes written
        EXPECT_NEAR(y[e], x[e], 0.02f) << e;           // f16 rounding of d and dmin only
    }
}

// On Gaussian rows Q5_K sits between Q4_K and Q6_K, and every element is within a step of its
// sub-block's scale (the fit may clip the extremes, never by more than one step).
TEST(QuantBlocks, Q5_KErrorBetweenQ4_KAndQ6_K) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    const int64_t n = 4096;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (auto& v : x) v = normal(rng);
    auto rel_rms = [&](GgmlType type) {
        std::vector<uint8_t> buf(*gguf::row_size(type, n));
        quantize_row(type, x.data(), buf.data(), n);
        dequantize_row(type, buf.data(), y.data(), n);
        double se = 0, ss = 0;
        for (int64_t i = 0; i < n; ++i) { se += double(x[size_t(i)] - y[size_t(i)]) * (x[size_t(i)] - y[size_t(i)]); ss += double(x[size_t(i)]) * x[size_t(i)]; }
        return std::sqrt(se / ss);
    };
    const double q4 = rel_rms(GgmlType::Q4_K), q6 = rel_rms(GgmlType::Q6_K), q5 = rel_rms(GgmlType::Q5_K);
    EXPECT_LT(q5, 0.6 * q4);
    EXPECT_GT(q5, q6);
    std::vector<uint8_t> buf(*gguf::row_size(GgmlType::Q5_K, n));
    quantize_row_q5_K(x.data(), buf.data(), n);
    dequantize_row_q5_K(buf.data(), y.data(), n);
    const auto* blocks = reinterpret_cast<const BlockQ5_K*>(buf.data());
    for (int64_t i = 0; i < n / 256; ++i)
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k_scale_min(j, blocks[i].scales, sc, m);
            const float step = f16_to_f32(blocks[i].d) * float(sc);
            for (int l = 0; l < 32; ++l) {
                const size_t e = size_t(256 * i + 32 * j + l);
                EXPECT_LE(std::fabs(x[e] - y[e]), step * 1.001f) << i << " " << j << " " << l;
            }
        }
}

TEST(QuantBlocks, ZeroRowsQuantiseToZero) {
    std::vector<float> x(256, 0.f), y(256, 1.f);
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                       GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
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
    EXPECT_THROW(quantize_row(GgmlType::Q5_K, x, out, 64), Error);
    EXPECT_THROW(quantize_row(GgmlType::Q8_K, x, out, 256), Error);
    EXPECT_THROW(dequantize_row(GgmlType::Q8_0, out, x, 33), Error);
    EXPECT_THROW(dequantize_row(GgmlType::TQ1_0, out, x, 256), Error);  // ternary: not supported
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
