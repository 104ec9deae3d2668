// The AMX int8 tile kernel (amx_kernel.h) against the AVX-512 VNNI packed kernel, bit for bit, for
// every packed type, token counts 1..70 (partial token tiles), row counts that are not multiples of
// the 16-row tile, several widths, through the f32 entry and the prequantised one. The emulated
// tiles run on any AVX-512 VNNI host; the hardware tiles only where CPUID and the OS allow AMX —
// elsewhere those tests are skipped and say so.
#include <cpuid.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/matmul_test_util.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;

constexpr GgmlType kPackedTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL,
                                     GgmlType::IQ4_XS, GgmlType::MXFP4};

bool packed_kernel_here() { return best_supported_isa() == Isa::avx512 && cpu_features().avx512vnni; }
bool super_blocks(GgmlType t) { return gguf::type_traits(t).block_size == 256; }

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t rows, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
            << what << " token " << int64_t(i) / rows << " row " << int64_t(i) % rows << ": " << got[i] << " vs " << want[i];
}

// Every type; per type a few shapes (rows: one panel, odd panels, partial 16-row tiles; widths of
// one to three super-blocks or 5..24 blocks) and token counts around every tile edge.
void compare_with_vnni(AmxMode mode) {
    AmxGuard amx;
    KernelConfigGuard config;
    set_isa(Isa::avx512);
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool(2);
    std::mt19937 rng(31);
    struct Shape {
        int64_t rows, blocks;
        std::vector<int64_t> tokens;
    };
    std::vector<int64_t> all_counts;
    for (int64_t n = 1; n <= 70; ++n) all_counts.push_back(n);
    const std::vector<int64_t> edges = {1, 15, 16, 17, 32, 33, 47, 70};
    for (GgmlType type : kPackedTypes) {
        const bool sb = super_blocks(type);
        const std::vector<Shape> shapes = {{37, sb ? 8 : 5, all_counts}, {8, sb ? 16 : 7, edges},
                                           {83, sb ? 24 : 24, edges}, {16, sb ? 8 : 1, edges}};
        for (const Shape& s : shapes) {
            const int64_t cols = s.blocks * 32;
            const auto w = make_weights(type, s.rows, cols, rng);
            const PackedWeight pw = pack_weight(w.view());
            ASSERT_TRUE(pw.is_packed());
            auto x = random_activations(70 * cols, rng);
            std::fill(x.begin() + 32, x.begin() + 64, 0.f);  // an all-zero block (d = 0)
            x[3] = 0;
            for (int64_t n : s.tokens) {
                const auto want = packed_product(pw, x.data(), n, pool, AmxMode::vnni);
                const auto got = packed_product(pw, x.data(), n, pool, mode);
                expect_same_bits(got, want, s.rows,
                                 fmt::format("{} {} rows x {} cols, {} tokens, {}", gguf::type_name(uint32_t(type)), s.rows,
                                             cols, n, amx_mode_name(mode)));
                if (::testing::Test::HasFatalFailure()) return;
            }
        }
    }
}

TEST(AmxMatmul, EmulatedTilesEqualTheVnniPanelsBitwise) {
    if (!packed_kernel_here()) GTEST_SKIP() << "no AVX-512 VNNI (the reference kernel)";
    compare_with_vnni(AmxMode::emulated);
}

TEST(AmxMatmul, HardwareTilesEqualTheVnniPanelsBitwise) {
    if (!packed_kernel_here() || !amx_hardware_available()) GTEST_SKIP() << kNoAmxHere;
    compare_with_vnni(AmxMode::hardware);
}

// Activations quantised ahead by the norm (prequantize_row) reach the AMX kernel with the same
// operands: bitwise the VNNI results, at every thread count and prefill task size.
void prequantized_and_threads(AmxMode mode) {
    AmxGuard amx;
    KernelConfigGuard config;
    set_isa(Isa::avx512);
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool1(1), pool3(3);
    std::mt19937 rng(32);
    for (GgmlType type : kPackedTypes) {
        const int64_t rows = 45, cols = super_blocks(type) ? 512 : 32 * 9, n = 37;
        const auto w = make_weights(type, rows, cols, rng);
        const PackedWeight pw = pack_weight(w.view());
        const auto x = random_activations(n * cols, rng);
        const auto want = packed_product(pw, x.data(), n, pool1, AmxMode::vnni);
        for (int64_t mc : {8, 16, 48, 1000}) {
            set_gemm_tiles({.kc = 512, .mc = mc, .nc = 64});
            expect_same_bits(packed_product(pw, x.data(), n, pool3, mode), want, rows,
                             fmt::format("{} mc {} {}", gguf::type_name(uint32_t(type)), mc, amx_mode_name(mode)));
        }
        set_gemm_tiles({});
        std::vector<uint8_t> storage(prequantized_bytes(n, cols));
        for (int64_t t = 0; t < n; ++t) prequantize_row(x.data() + t * cols, t, n, cols, storage.data());
        select_amx_mode(mode);
        const uint64_t before = amx_dispatch_count();
        std::vector<float> y(size_t(n * rows));
        matmul_prequantized(pw, storage.data(), n, y.data(), pool3);
        EXPECT_EQ(amx_dispatch_count(), before + 1);
        expect_same_bits(y, want, rows, fmt::format("{} prequantised {}", gguf::type_name(uint32_t(type)), amx_mode_name(mode)));
    }
}

TEST(AmxMatmul, EmulatedPrequantizedAndAnyThreadSplitAgree) {
    if (!packed_kernel_here()) GTEST_SKIP() << "no AVX-512 VNNI (the reference kernel)";
    prequantized_and_threads(AmxMode::emulated);
}

TEST(AmxMatmul, HardwarePrequantizedAndAnyThreadSplitAgree) {
    if (!packed_kernel_here() || !amx_hardware_available()) GTEST_SKIP() << kNoAmxHere;
    prequantized_and_threads(AmxMode::hardware);
}

// The threshold: steps below amx_min_tokens stay on the VNNI panels, steps at or above it take the
// tiles, and a token's outputs are the same bytes either way (so the switch keeps batch invariance).
TEST(AmxMatmul, TheThresholdSwitchesPathsWithoutChangingABit) {
    if (!packed_kernel_here()) GTEST_SKIP() << "no AVX-512 VNNI";
    AmxGuard amx;
    KernelConfigGuard config;
    set_isa(Isa::avx512);
    set_quant_method(QuantMethod::int8_dot);
    ThreadPool pool(2);
    std::mt19937 rng(33);
    const int64_t rows = 40, cols = 512;
    const auto w = make_weights(GgmlType::Q4_K, rows, cols, rng);
    const PackedWeight pw = pack_weight(w.view());
    const auto x = random_activations(48 * cols, rng);
    set_amx_enabled(true);
    set_amx_emulation(true);
    CallPaths p = call_paths();
    p.amx_min_tokens = 20;
    set_call_paths(p);
    EXPECT_TRUE(amx_path_available());
    std::vector<float> below(size_t(19 * rows)), at(size_t(20 * rows)), above(size_t(48 * rows));
    uint64_t count = amx_dispatch_count();
    matmul(pw, x.data(), 19, below.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), count) << "19 tokens < 20: the VNNI panels";
    matmul(pw, x.data(), 20, at.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), ++count) << "20 tokens: the tiles";
    matmul(pw, x.data(), 48, above.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), ++count);
    EXPECT_EQ(std::memcmp(at.data(), above.data(), at.size() * 4), 0);
    EXPECT_EQ(std::memcmp(below.data(), at.data(), below.size() * 4), 0);
    // Without a plan's value the default applies.
    p.amx_min_tokens.reset();
    set_call_paths(p);
    EXPECT_EQ(amx_min_tokens(), kDefaultAmxMinTokens);
    matmul(pw, x.data(), kDefaultAmxMinTokens - 1, above.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), count);
    matmul(pw, x.data(), kDefaultAmxMinTokens, above.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), count + 1);
}

// PAGODA_AMX=0 (here: its switch) keeps the tiles off even with the emulation hook on; so does a
// path without the packed int8 kernel. Where CPUID lacks AMX the hardware is never "available".
TEST(AmxMatmul, DisabledOrAbsentAmxIsNeverUsed) {
    AmxGuard amx;
    KernelConfigGuard config;
    set_amx_emulation(true);
    set_amx_enabled(false);
    EXPECT_FALSE(amx_available());
    EXPECT_FALSE(amx_path_available());
    EXPECT_EQ(amx_status(), "disabled by PAGODA_AMX=0");
    ThreadPool pool(2);
    std::mt19937 rng(34);
    const auto w = make_weights(GgmlType::Q8_0, 24, 256, rng);
    const PackedWeight pw = pack_weight(w.view());
    const auto x = random_activations(64 * 256, rng);
    std::vector<float> y(size_t(64 * 24));
    const uint64_t count = amx_dispatch_count();
    matmul(pw, x.data(), 64, y.data(), pool);
    EXPECT_EQ(amx_dispatch_count(), count);
    set_amx_enabled(true);
    if (packed_kernel_here()) {
        set_quant_method(QuantMethod::dequant_fma);  // no packed int8 path: nothing for AMX to replace
        EXPECT_FALSE(amx_path_available());
        matmul(pw, x.data(), 64, y.data(), pool);
        EXPECT_EQ(amx_dispatch_count(), count);
    }
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 25))) {
        EXPECT_FALSE(amx_hardware_available());
        EXPECT_NE(amx_status().find("absent (CPUID: no amx_"), std::string::npos) << amx_status();
    }
}

TEST(AmxAvailability, CpuidAndXcr0BitsDecide) {
    const uint64_t tiles_on = uint64_t(3) << 17, avx512_on = 0xe7;
    const uint32_t tile = 1u << 24, int8 = 1u << 25;
    EXPECT_EQ(amx_missing(tile | int8, avx512_on | tiles_on), nullptr);
    EXPECT_STREQ(amx_missing(0, avx512_on | tiles_on), "CPUID: no amx_tile");
    EXPECT_STREQ(amx_missing(tile, avx512_on | tiles_on), "CPUID: no amx_int8");
    EXPECT_STREQ(amx_missing(int8, avx512_on | tiles_on), "CPUID: no amx_tile");
    const std::string no_state = "the OS does not enable the tile state (XCR0 bits 17/18)";
    EXPECT_EQ(amx_missing(tile | int8, avx512_on), no_state);
    EXPECT_EQ(amx_missing(tile | int8, avx512_on | (uint64_t(1) << 17)), no_state);
    EXPECT_EQ(amx_missing(tile | int8, avx512_on | (uint64_t(1) << 18)), no_state);
}

}  // namespace
}  // namespace pagoda::backend::cpu
