// The GGML type table against block layouts worked out from ggml's block structs (e.g. q4_K: two
// fp16 scales + 12 bytes of packed 6-bit scales + 128 bytes of 4-bit quants = 144 bytes / 256 values).
#include <gtest/gtest.h>

#include "gguf/ggml_types.h"

namespace pagoda::gguf {
namespace {

TEST(GgmlTypes, BlockGeometryFromLayouts) {
    struct Case { GgmlType type; const char* name; int64_t block; int64_t bytes; };
    const Case cases[] = {
        {GgmlType::F32, "f32", 1, 4},
        {GgmlType::F16, "f16", 1, 2},
        {GgmlType::BF16, "bf16", 1, 2},
        {GgmlType::Q4_0, "q4_0", 32, 2 + 16},
        {GgmlType::Q4_1, "q4_1", 32, 2 + 2 + 16},
        {GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16},
        {GgmlType::Q5_1, "q5_1", 32, 2 + 2 + 4 + 16},
        {GgmlType::Q8_0, "q8_0", 32, 2 + 32},
        {GgmlType::Q8_1, "q8_1", 32, 2 + 2 + 32},
        {GgmlType::Q2_K, "q2_K", 256, 16 + 64 + 2 + 2},
        {GgmlType::Q3_K, "q3_K", 256, 32 + 64 + 12 + 2},
        {GgmlType::Q4_K, "q4_K", 256, 2 + 2 + 12 + 128},
        {GgmlType::Q5_K, "q5_K", 256, 2 + 2 + 12 + 32 + 128},
        {GgmlType::Q6_K, "q6_K", 256, 128 + 64 + 16 + 2},
        {GgmlType::Q8_K, "q8_K", 256, 4 + 256 + 32},
        {GgmlType::IQ4_NL, "iq4_nl", 32, 2 + 16},
        {GgmlType::IQ4_XS, "iq4_xs", 256, 2 + 2 + 4 + 128},
        {GgmlType::MXFP4, "mxfp4", 32, 1 + 16},
        {GgmlType::IQ2_XXS, "iq2_xxs", 256, 2 + 64},
        {GgmlType::IQ2_XS, "iq2_xs", 256, 2 + 64 + 8},
        {GgmlType::IQ2_S, "iq2_s", 256, 2 + 64 + 8 + 8},
        {GgmlType::IQ3_XXS, "iq3_xxs", 256, 2 + 64 + 32},
        {GgmlType::IQ3_S, "iq3_s", 256, 2 + 64 + 8 + 32 + 4},
        {GgmlType::IQ1_S, "iq1_s", 256, 2 + 32 + 16},
        {GgmlType::IQ1_M, "iq1_m", 256, 32 + 16 + 8},
        {GgmlType::I8, "i8", 1, 1},
        {GgmlType::I64, "i64", 1, 8},
        {GgmlType::F64, "f64", 1, 8},
    };
    for (const Case& c : cases) {
        const TypeTraits& t = type_traits(c.type);
        EXPECT_STREQ(t.name, c.name);
        EXPECT_EQ(t.block_size, c.block) << c.name;
        EXPECT_EQ(t.type_size, c.bytes) << c.name;
        EXPECT_EQ(type_from_name(c.name), c.type);
    }
}

TEST(GgmlTypes, RetiredAndUnknownIds) {
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu}) {
        EXPECT_EQ(type_traits(id), nullptr) << id;
        EXPECT_EQ(type_name(id), "unknown(" + std::to_string(id) + ")");
    }
    EXPECT_EQ(type_name(12), "q4_K");
    EXPECT_EQ(type_from_name("Q4_K"), GgmlType::Q4_K);
    EXPECT_EQ(type_from_name("IQ2_XXS"), GgmlType::IQ2_XXS);
    EXPECT_EQ(type_from_name("q4"), std::nullopt);
    EXPECT_EQ(type_from_name(""), std::nullopt);
}

TEST(GgmlTypes, RowSize) {
    EXPECT_EQ(row_size(GgmlType::F32, 64), 256u);
    EXPECT_EQ(row_size(GgmlType::Q8_0, 4096), 4096u / 32 * 34);
    EXPECT_EQ(row_size(GgmlType::Q4_K, 4096), 16u * 144);
    EXPECT_EQ(row_size(GgmlType::Q4_K, 0), 0u);
    EXPECT_EQ(row_size(GgmlType::Q4_K, 100), std::nullopt);  // not a whole number of blocks
    EXPECT_EQ(row_size(GgmlType::Q8_0, -32), std::nullopt);
    EXPECT_EQ(row_size(GgmlType::F64, INT64_MAX), std::nullopt);  // bytes overflow 64 bits
}

}  // namespace
}  // namespace pagoda::gguf
