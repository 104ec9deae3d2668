// The codebook weight types (IQ4_NL, IQ4_XS, MXFP4, IQ2_*, IQ3_*, IQ1_*): the grids against ggml's
// tables (hashes of ggml's uint64 / uint32 tables as little-endian bytes, and sample entries), and
// hand-built blocks with known bytes against values worked out by hand from the format definitions.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/codebook_blocks.h"
#include "quant/dequantize.h"
#include "quant/iq_grids.h"

namespace pagoda::quant {
namespace {

using gguf::GgmlType;

uint64_t fnv1a(const void* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
    return h;
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

std::vector<float> dequant(GgmlType type, const std::vector<uint8_t>& block) {
    const int64_t n = gguf::type_traits(type).block_size;
    EXPECT_EQ(int64_t(block.size()), gguf::type_traits(type).type_size);
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(type, block.data(), out.data(), n);
    return out;
}

void expect_values(const std::vector<float>& got, size_t at, const std::vector<float>& want, const char* what) {
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[at + i], want[i]) << what << " value " << at + i;
}

TEST(CodebookGrids, EqualGgmlsTables) {
    const IqGrids& g = iq_grids();
    // FNV-1a of ggml-common.h's tables, each entry as its little-endian bytes.
    EXPECT_EQ(fnv1a(g.iq2xxs, sizeof g.iq2xxs), 0xbb4ee025b5ac6e8eull);
    EXPECT_EQ(fnv1a(g.iq2xs, sizeof g.iq2xs), 0xc9b1ee61e79909bdull);
    EXPECT_EQ(fnv1a(g.iq2s, sizeof g.iq2s), 0x123edd38a3b62b90ull);
    EXPECT_EQ(fnv1a(g.iq3xxs, sizeof g.iq3xxs), 0xdfa5dc83d6a155d5ull);
    EXPECT_EQ(fnv1a(g.iq3s, sizeof g.iq3s), 0xfa37020c25b44829ull);
    EXPECT_EQ(fnv1a(g.iq1s, sizeof g.iq1s), 0x6703ed863501ae2eull);
    // Sample entries: iq2xxs_grid[1] = 0x080808080808082b, [255] = 0x2b2b2b1908081908,
    // iq3xxs_grid[7] = 0x04041414, iq3s_grid[300] = 0x07030503, iq1s_grid[2047] = 0x0101010101010101.
    const uint8_t e1[8] = {43, 8, 8, 8, 8, 8, 8, 8}, e255[8] = {8, 25, 8, 8, 25, 43, 43, 43};
    EXPECT_EQ(std::memcmp(g.iq2xxs[1], e1, 8), 0);
    EXPECT_EQ(std::memcmp(g.iq2xxs[255], e255, 8), 0);
    const uint8_t x7[4] = {20, 20, 4, 4}, s300[4] = {3, 5, 3, 7};
    EXPECT_EQ(std::memcmp(g.iq3xxs[7], x7, 4), 0);
    EXPECT_EQ(std::memcmp(g.iq3s[300], s300, 4), 0);
    for (int k = 0; k < 8; ++k) {
        EXPECT_EQ(g.iq1s[2047][k], 1);
        EXPECT_EQ(g.iq1s[0][k], -1);
        EXPECT_EQ(g.iq2xs[511][k], 43);
        EXPECT_EQ(g.iq2s[1023][k], 43);
    }
    // ksigns_iq2xs: 0 -> 0, 1 -> 129, 3 -> 3, 127 -> 255, 100 -> 228.
    EXPECT_EQ(iq_sign_bits(0), 0);
    EXPECT_EQ(iq_sign_bits(1), 129);
    EXPECT_EQ(iq_sign_bits(3), 3);
    EXPECT_EQ(iq_sign_bits(127), 255);
    EXPECT_EQ(iq_sign_bits(100), 228);
}

TEST(CodebookBlocks, Iq4NlKnownBlock) {
    std::vector<uint8_t> b(18);
    put16(b.data(), f32_to_f16(0.5f));
    for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | ((15 - j) << 4));
    const auto y = dequant(GgmlType::IQ4_NL, b);
    const std::vector<float> half = {-63.5f, -52, -41.5f, -32.5f, -24.5f, -17.5f, -11, -5,
                                     0.5f,   6.5f, 12.5f, 19,     26.5f,  34.5f,  44.5f, 56.5f};
    expect_values(y, 0, half, "iq4_nl");
    for (int j = 0; j < 16; ++j) EXPECT_EQ(y[size_t(16 + j)], half[size_t(15 - j)]);
}

TEST(CodebookBlocks, Mxfp4KnownBlockAndScales) {
    std::vector<uint8_t> b(17);
    b[0] = 129;  // 2^(129 - 128) = 2
    for (int j = 0; j < 16; ++j) b[1 + j] = uint8_t(j | ((15 - j) << 4));
    const auto y = dequant(GgmlType::MXFP4, b);
    const std::vector<float> half = {0, 2, 4, 6, 8, 12, 16, 24, 0, -2, -4, -6, -8, -12, -16, -24};
    expect_values(y, 0, half, "mxfp4");
    for (int j = 0; j < 16; ++j) EXPECT_EQ(y[size_t(16 + j)], half[size_t(15 - j)]);
    EXPECT_EQ(e8m0_half_to_f32(0), std::ldexp(1.f, -128));
    EXPECT_EQ(e8m0_half_to_f32(1), std::ldexp(1.f, -127));
    EXPECT_EQ(e8m0_half_to_f32(2), std::ldexp(1.f, -126));
    EXPECT_EQ(e8m0_half_to_f32(128), 1.f);
    EXPECT_EQ(e8m0_half_to_f32(255), std::ldexp(1.f, 127));
}

TEST(CodebookBlocks, Iq4XsKnownBlock) {
    std::vector<uint8_t> b(136);
    put16(b.data(), f32_to_f16(0.25f));
    // Sub-block j: ls = 8 j + 1 (1, 9, ..., 57), i.e. scales -31, -23, -15, -7, 1, 9, 17, 25 times d.
    uint16_t scales_h = 0;
    for (int j = 0; j < 8; ++j) {
        const int ls = 8 * j + 1;
        b[4 + j / 2] |= uint8_t((ls & 15) << (4 * (j % 2)));
        scales_h |= uint16_t((ls >> 4) << (2 * j));
    }
    put16(b.data() + 2, scales_h);
    for (int i = 0; i < 128; ++i) b[8 + i] = 0x9f;  // low nibble 15 -> 113, high 9 -> 13
    const auto y = dequant(GgmlType::IQ4_XS, b);
    const int l[8] = {-31, -23, -15, -7, 1, 9, 17, 25};
    for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 16; ++i) {
            EXPECT_EQ(y[size_t(32 * j + i)], 0.25f * float(l[j]) * 113.f) << j;
            EXPECT_EQ(y[size_t(32 * j + 16 + i)], 0.25f * float(l[j]) * 13.f) << j;
        }
    EXPECT_EQ(y[0], -875.75f);
    EXPECT_EQ(y[32 * 7 + 16], 81.25f);
}

TEST(CodebookBlocks, Iq2XxsKnownBlock) {
    std::vector<uint8_t> b(66);
    put16(b.data(), f32_to_f16(1.f));
    b[2] = 1; b[3] = 255; b[4] = 0; b[5] = 0;  // grid indices of the four groups of sub-block 0
    put32(b.data() + 6, 1u | (3u << 7) | (0u << 14) | (127u << 21) | (3u << 28));  // signs 1, 3, 0, 127; scale 3
    const auto y = dequant(GgmlType::IQ2_XXS, b);
    const float db = 0.875f;  // (0.5 + 3) * 0.25
    expect_values(y, 0, {-43 * db, 8 * db, 8 * db, 8 * db, 8 * db, 8 * db, 8 * db, -8 * db}, "group 0");
    expect_values(y, 8, {-8 * db, -25 * db, 8 * db, 8 * db, 25 * db, 43 * db, 43 * db, 43 * db}, "group 1");
    expect_values(y, 16, std::vector<float>(8, 7.f), "group 2");
    expect_values(y, 24, std::vector<float>(8, -7.f), "group 3");
    expect_values(y, 32, std::vector<float>(224, 1.f), "zero sub-blocks: grid 0 (all 8) * 0.125");
}

TEST(CodebookBlocks, Iq2XsKnownBlock) {
    std::vector<uint8_t> b(74);
    put16(b.data(), f32_to_f16(2.f));
    put16(b.data() + 2, uint16_t(511 | (1 << 9)));  // group 0: iq2xs_grid[511] (all 43), signs 129
    put16(b.data() + 4, 0);                         // group 1: grid 0 (all 8)
    put16(b.data() + 6, 511);                       // group 2: all 43, no signs
    b[66] = 0x52;                                   // scales: first half 2 -> 1.25, second 5 -> 2.75
    const auto y = dequant(GgmlType::IQ2_XS, b);
    expect_values(y, 0, {-53.75f, 53.75f, 53.75f, 53.75f, 53.75f, 53.75f, 53.75f, -53.75f}, "group 0");
    expect_values(y, 8, std::vector<float>(8, 10.f), "group 1");
    expect_values(y, 16, std::vector<float>(8, 118.25f), "group 2");
    expect_values(y, 24, std::vector<float>(8, 22.f), "group 3");
    expect_values(y, 32, std::vector<float>(224, 2.f), "zero sub-blocks");
}

TEST(CodebookBlocks, Iq2SKnownBlock) {
    std::vector<uint8_t> b(82);
    put16(b.data(), f32_to_f16(1.f));
    b[2] = 0xff;       // group 0 low index bits
    b[2 + 32] = 0x0f;  // group 0 signs: first four negative
    b[66] = 0x03;      // qh of sub-block 0: group 0's index bits 8-9 -> 1023 (all 43)
    b[74] = 0x01;      // scales of sub-block 0: 1 -> 0.375, 0 -> 0.125
    const auto y = dequant(GgmlType::IQ2_S, b);
    const float v = 0.375f * 43;
    expect_values(y, 0, {-v, -v, -v, -v, v, v, v, v}, "group 0");
    expect_values(y, 8, std::vector<float>(8, 3.f), "group 1");
    expect_values(y, 16, std::vector<float>(16, 1.f), "second half");
}

TEST(CodebookBlocks, Iq3XxsKnownBlock) {
    std::vector<uint8_t> b(98);
    put16(b.data(), f32_to_f16(1.f));
    b[2] = 7;                                // iq3xxs_grid[7] = {20, 20, 4, 4}
    b[3] = 0;                                // iq3xxs_grid[0] = {4, 4, 4, 4}
    put32(b.data() + 2 + 64, 1u | (1u << 28));  // group 0 signs 129, scale 1 -> 0.75
    const auto y = dequant(GgmlType::IQ3_XXS, b);
    expect_values(y, 0, {-15, 15, 3, 3, 3, 3, 3, -3}, "group 0");
    expect_values(y, 8, std::vector<float>(24, 3.f), "groups 1-3");
    expect_values(y, 32, std::vector<float>(224, 1.f), "zero sub-blocks: 4 * 0.25");
}

TEST(CodebookBlocks, Iq3SKnownBlock) {
    std::vector<uint8_t> b(110);
    put16(b.data(), f32_to_f16(0.5f));
    b[2] = 44;     // with qh bit 0: index 300 = {3, 5, 3, 7}
    b[66] = 1;     // qh of sub-block 0
    b[74] = 0x81;  // signs of group 0: values 0 and 7 negative
    b[106] = 0x02; // sub-block 0 scale 2 -> 0.5 * 5, sub-block 1 scale 0 -> 0.5
    const auto y = dequant(GgmlType::IQ3_S, b);
    expect_values(y, 0, {-7.5f, 12.5f, 7.5f, 17.5f, 2.5f, 2.5f, 2.5f, -2.5f}, "group 0");
    expect_values(y, 8, std::vector<float>(24, 2.5f), "groups 1-3");
    expect_values(y, 32, std::vector<float>(32, 0.5f), "sub-block 1");
}

TEST(CodebookBlocks, Iq1SKnownBlock) {
    std::vector<uint8_t> b(50);
    put16(b.data(), f32_to_f16(1.f));
    b[2] = 0xff;                                    // group 0 low index bits
    put16(b.data() + 34, uint16_t(7 | (2 << 12)));  // group 0 high bits 7 -> 2047 (all +1), scale 2, delta +
    put16(b.data() + 36, uint16_t(0x8000));         // sub-block 1: scale 0, delta -
    const auto y = dequant(GgmlType::IQ1_S, b);
    expect_values(y, 0, std::vector<float>(8, 5.625f), "group 0: 5 * (1 + 0.125)");
    expect_values(y, 8, std::vector<float>(24, -4.375f), "groups 1-3: 5 * (-1 + 0.125)");
    expect_values(y, 32, std::vector<float>(32, -1.125f), "sub-block 1: 1 * (-1 - 0.125)");
}

TEST(CodebookBlocks, Iq1MKnownBlock) {
    std::vector<uint8_t> b(56);
    // d = 1.0 (f16 0x3c00) in the top nibbles of the four scale words; sub-block 0 scales 1 and 2.
    put16(b.data() + 48, uint16_t(0x0000 | 1 | (2 << 3)));
    put16(b.data() + 50, 0x0000);
    put16(b.data() + 52, 0xc000);
    put16(b.data() + 54, 0x3000);
    b[0] = 0xff;   // group 0 low index bits
    b[32] = 0x07;  // group 0 high bits 7 -> 2047 (all +1), deltas of groups 0, 1 positive
    b[33] = 0x88;  // groups 2, 3: index 0 (all -1), deltas negative
    const auto y = dequant(GgmlType::IQ1_M, b);
    expect_values(y, 0, std::vector<float>(8, 3.375f), "group 0: 3 * (1 + 0.125)");
    expect_values(y, 8, std::vector<float>(8, -2.625f), "group 1: 3 * (-1 + 0.125)");
    expect_values(y, 16, std::vector<float>(16, -5.625f), "groups 2-3: 5 * (-1 - 0.125)");
    expect_values(y, 32, std::vector<float>(32, -0.875f), "sub-block 1: 1 * (-1 + 0.125)");
}

TEST(CodebookBlocks, EveryTypeIsSupportedAndChecksLengths) {
    for (GgmlType t : {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::IQ2_XXS, GgmlType::IQ2_XS,
                       GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M}) {
        EXPECT_TRUE(is_supported_block_type(t)) << gguf::type_name(uint32_t(t));
        std::vector<uint8_t> b(size_t(gguf::type_traits(t).type_size));
        float out[256];
        EXPECT_THROW(dequantize_row(t, b.data(), out, 16), Error);
    }
    EXPECT_FALSE(is_supported_block_type(GgmlType::TQ1_0));
}

}  // namespace
}  // namespace pagoda::quant
