// --kv-memory values: sizes need a unit, fractions of free memory are written 0.9 or 90%, and a
// bare whole number is refused with a message that says how to write it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/kv_options.h"

namespace pagoda::model {
namespace {

std::string error_of(const std::string& text) {
    try {
        parse_memory_budget(text);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(KvMemoryBudget, SizesWithUnits) {
    EXPECT_EQ(parse_memory_budget("512MiB"), 512ull << 20);
    EXPECT_EQ(parse_memory_budget("8GiB"), 8ull << 30);
    EXPECT_EQ(parse_memory_budget("2G"), 2ull << 30);
    EXPECT_EQ(parse_memory_budget("2g"), 2ull << 30);
    EXPECT_EQ(parse_memory_budget("1.5GB"), 3ull << 29);
    EXPECT_EQ(parse_memory_budget("64KiB"), 64ull << 10);
    EXPECT_EQ(parse_memory_budget("1TiB"), 1ull << 40);
    EXPECT_EQ(parse_memory_budget("1073741824B"), 1ull << 30);
}

TEST(KvMemoryBudget, FractionsOfFreeMemory) {
    const uint64_t half = parse_memory_budget("0.5"), percent = parse_memory_budget("50%");
    EXPECT_GT(half, 0u);
    // Free memory moves between the two reads; the two spellings mean the same.
    EXPECT_NEAR(double(percent), double(half), 0.05 * double(half));
    EXPECT_GE(parse_memory_budget("1.0"), parse_memory_budget("0.9"));
    EXPECT_GT(parse_memory_budget("100%"), 0u);
}

// A device backend's cache: a fraction is of the memory the backend names (Backend::memory_bytes),
// a size stays a size; a split model counts its blocks per part with it.
TEST(KvMemoryBudget, FractionsOfABackendsOwnMemory) {
    EXPECT_EQ(parse_memory_budget("0.25", "--kv-memory", 4096), 1024u);
    EXPECT_EQ(parse_memory_budget("50%", "--kv-memory", 4096), 2048u);
    EXPECT_EQ(parse_memory_budget("2KiB", "--kv-memory", 1 << 30), 2048u);
    EXPECT_TRUE(is_fractional_budget("0.9"));
    EXPECT_TRUE(is_fractional_budget("90%"));
    EXPECT_FALSE(is_fractional_budget("512MiB"));
    EXPECT_FALSE(is_fractional_budget("1.5GiB"));
    EXPECT_FALSE(is_fractional_budget(""));
    kv::KvLayout layout{.n_layers = 2, .n_kv_heads = 1, .head_dim = 8, .block_size = 4, .dtype = kv::KvDtype::f32};
    // 2 layers x K,V x 4 slots x 8 x 4 bytes = 512 bytes a block; half of 8 KiB holds 8.
    EXPECT_EQ(kv_block_count({.memory = "50%"}, layout, 0, 8192), 8);
}

TEST(KvMemoryBudget, BareWholeNumberAsksForAUnit) {
    for (const char* text : {"1", "1024", "0"}) {
        const std::string e = error_of(text);
        EXPECT_NE(e.find("has no unit"), std::string::npos) << text << ": " << e;
        EXPECT_NE(e.find("MiB"), std::string::npos) << e;
        EXPECT_NE(e.find("90%"), std::string::npos) << e;
    }
}

TEST(KvMemoryBudget, ClearErrors) {
    EXPECT_NE(error_of("1.5").find("at most 1"), std::string::npos) << error_of("1.5");
    EXPECT_NE(error_of("150%").find("at most 1"), std::string::npos);
    EXPECT_NE(error_of("0%").find("above 0"), std::string::npos);
    EXPECT_NE(error_of("lots").find("is not a size"), std::string::npos);
    EXPECT_NE(error_of("").find("is not a size"), std::string::npos);
    EXPECT_NE(error_of("3parsecs").find("unknown unit 'parsecs'"), std::string::npos);
    EXPECT_NE(error_of("0MiB").find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
