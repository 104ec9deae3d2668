// The AMX bf16 method (amx_bf16_kernel.h): the emulated TDPBF16PS against hand-worked cases of the
// instruction's documented arithmetic (two chains per instruction, denormals in and out), the tile
// kernel against a model of that arithmetic written here from the contract (bitwise, at every token
// count, thread count and task size: batch invariance), against matmul_reference within the bf16
// rounding bound, stacking, the packed bytes, and where the method must not run. The emulated tiles
// run on any AVX-512 host; the hardware tests only where CPUID says amx_bf16 and the OS grants the
// tiles — elsewhere they are skipped and say so.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/amx/amx_tiles.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using namespace testing;
using namespace detail;

constexpr const char* kNoAmxBf16 = "no AMX-BF16 on this host (CPUID amx_bf16 / OS permission)";

bool avx512_here() { return best_supported_isa() == Isa::avx512; }

uint16_t bits16(float v) { return uint16_t(float_to_bits(v) >> 16); }  // exact for the values used

// Runs one TDPBF16PS on the emulated tiles: C (m x n f32) += A (m x k pairs) . B (k x n pairs).
std::vector<float> emulated_dp(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, std::vector<float> c, int m,
                               int k, int n) {
    AmxConfig cfg;
    cfg.rows[0] = uint8_t(m), cfg.colsb[0] = uint16_t(4 * n);
    cfg.rows[1] = uint8_t(m), cfg.colsb[1] = uint16_t(4 * k);
    cfg.rows[2] = uint8_t(k), cfg.colsb[2] = uint16_t(4 * n);
    amx_emu_load_config(cfg);
    amx_emu_load(0, c.data(), 4 * n);
    amx_emu_load(1, a.data(), 4 * k);
    amx_emu_load(2, b.data(), 4 * n);
    amx_emu_dpbf16ps(0, 1, 2);
    amx_emu_store(0, c.data(), 4 * n);
    amx_emu_release();
    return c;
}

// Even products 1, 2^-24, 2^-24 and odd products 2^-24, 2^-24, 0. Two chains: even stays 1 (each
// 2^-24 is a tie to even), odd reaches 2^-23, and their sum is 1 + 2^-23. One chain over the pairs
// in order (vdpbf16ps's, or a plain dot product) would stay at 1.
TEST(AmxEmulation, Bf16ProductsRunInTwoChainsPerInstruction) {
    const uint16_t one = bits16(1.f), e = bits16(std::ldexp(1.f, -12)), z = 0;
    const std::vector<uint16_t> a = {one, e, e, e, e, z};  // row 0: pairs (1, e), (e, e), (e, 0)
    const std::vector<uint16_t> b = {one, e, e, e, e, z};  // one column: rows k = the same pairs
    const auto c = emulated_dp(a, b, {0.f}, 1, 3, 1);
    EXPECT_EQ(float_to_bits(c[0]), float_to_bits(1.f + std::ldexp(1.f, -23))) << c[0];
    // Accumulated into C after the sum: C = 3 + (1 + 2^-23) rounds to 4.
    const auto c3 = emulated_dp(a, b, {3.f}, 1, 3, 1);
    EXPECT_EQ(c3[0], 4.f);
}

TEST(AmxEmulation, Bf16DenormalsReadAsZeroAndFlushToZero) {
    const uint16_t denormal = 0x0001, big = bits16(std::ldexp(1.f, 127)), tiny = bits16(std::ldexp(1.f, -70));
    // A denormal input times 2^127 would be 2^-6: read as zero, C keeps 5.
    EXPECT_EQ(emulated_dp({denormal, 0}, {big, 0}, {5.f}, 1, 1, 1)[0], 5.f);
    // 2^-70 * 2^-70 = 2^-140 is an f32 denormal: flushed, C stays +0 (not 2^-140).
    const float flushed = emulated_dp({tiny, 0}, {tiny, 0}, {0.f}, 1, 1, 1)[0];
    EXPECT_EQ(float_to_bits(flushed), 0u) << flushed;
    // A denormal C reads as zero too.
    EXPECT_EQ(float_to_bits(emulated_dp({0, 0}, {0, 0}, {1e-40f}, 1, 1, 1)[0]), 0u);
    // Normal values are untouched: 2 * 3 + (-1) * 0.5 = 5.5 on top of 0.25.
    EXPECT_EQ(emulated_dp({bits16(2.f), bits16(-1.f)}, {bits16(3.f), bits16(0.5f)}, {0.25f}, 1, 1, 1)[0], 5.75f);
}

TEST(AmxEmulation, Bf16ShapesMustAgree) {
    AmxConfig cfg;
    cfg.rows[0] = 2, cfg.colsb[0] = 64;
    cfg.rows[1] = 2, cfg.colsb[1] = 64;  // 16 pairs of K
    cfg.rows[2] = 8, cfg.colsb[2] = 64;  // but B has 8 rows
    amx_emu_load_config(cfg);
    try {
        amx_emu_dpbf16ps(0, 1, 2);
        ADD_FAILURE() << "mismatched shapes were accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("TDPBF16PS shapes do not agree"), std::string::npos) << e.what();
    }
    EXPECT_THROW(amx_emu_dpbf16ps(0, 0, 2), Error);  // C and A the same register
    amx_emu_release();
    EXPECT_THROW(amx_emu_dpbf16ps(0, 1, 2), Error);  // no configuration
}

// ---- The kernel against the contract ----

struct Bf16TilesGuard {
    AmxGuard amx;
    KernelConfigGuard config;
    // The best path: avx512 where the CPU has it (every test that needs it skips elsewhere).
    Bf16TilesGuard() {
        set_isa(best_supported_isa());
        set_amx_enabled(true);
        set_amx_emulation(true);
        set_float_method(FloatMethod::amx_bf16);
    }
};

float bf16_input(uint16_t h) { return bf16_to_f32((h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h); }
float flush(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.f, v) : v; }
// The activations' rounding (bf16_round.h): zero exponent -> signed zero, else nearest even.
uint16_t act_to_bf16(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? uint16_t(float_to_bits(v) >> 16 & 0x8000u) : f32_to_bf16(v);
}
uint16_t weight_bf16(const RandomWeights& w, int64_t r, int64_t c) {
    uint16_t h;
    std::memcpy(&h, w.bytes.data() + 2 * (r * w.cols + c), 2);
    return w.type == GgmlType::BF16 ? h : f32_to_bf16(f16_to_f32(h));
}

// y[t][r] per the contract: from +0, one instruction per K tile of 16 column pairs in order (zero
// pairs past the columns), each two fma chains from +0 (even / odd columns), their sum added to y.
std::vector<float> contract_reference(const RandomWeights& w, const std::vector<float>& x, int64_t n) {
    const int64_t pairs = (w.cols + 1) / 2, k_tiles = (pairs + 15) / 16;
    std::vector<float> y(size_t(n * w.rows));
    auto weight = [&](int64_t r, int64_t c) { return c < w.cols ? bf16_input(weight_bf16(w, r, c)) : 0.f; };
    auto act = [&](int64_t t, int64_t c) { return c < w.cols ? bf16_input(act_to_bf16(x[size_t(t * w.cols + c)])) : 0.f; };
    for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < w.rows; ++r) {
            float acc = 0.f;
            for (int64_t kt = 0; kt < k_tiles; ++kt) {
                float even = 0.f, odd = 0.f;
                for (int64_t j = 0; j < 16; ++j) {
                    const int64_t c = 2 * (kt * 16 + j);
                    even = flush(std::fma(act(t, c), weight(r, c), even));
                    odd = flush(std::fma(act(t, c + 1), weight(r, c + 1), odd));
                }
                acc = flush(flush(acc) + flush(even + odd));
            }
            y[size_t(t * w.rows + r)] = acc;
        }
    return y;
}

std::vector<float> activations(int64_t count, std::mt19937& rng) {
    auto x = random_activations(count, rng);
    const float specials[] = {1e-39f, -2e-40f, 0.f, -0.f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -3.0f - 1.0f / 64};
    for (size_t i = 0; i < x.size(); i += 11) x[i] = specials[(i / 11) % 7];
    return x;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, int64_t rows, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(float_to_bits(got[i]), float_to_bits(want[i]))
            << what << " token " << int64_t(i) / rows << " row " << int64_t(i) % rows << ": " << got[i] << " vs " << want[i];
}

std::vector<float> product(const PackedWeight& w, const float* x, int64_t n, ThreadPool& pool) {
    const uint64_t before = amx_bf16_dispatch_count();
    std::vector<float> y(size_t(n * w.source().rows), -7.f);
    matmul(w, x, n, y.data(), pool);
    EXPECT_EQ(amx_bf16_dispatch_count(), before + 1) << "the AMX bf16 tiles were not taken";
    return y;
}

struct Shape { int64_t rows, cols; };
// 257 and 600 columns: 9 and 19 K tiles, so the prefill path's K chunks (8 tiles) end inside a
// product, once and twice (C tiles stored and reloaded between chunks).
const Shape kShapes[] = {{1, 1}, {15, 31}, {16, 32}, {17, 33}, {33, 70}, {50, 64}, {40, 257}, {24, 600}};

void contract_at_every_count(bool hardware) {
    ThreadPool pool1(1), pool2(2);
    std::mt19937 rng(51);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16})
        for (const Shape& s : kShapes) {
            const auto w = make_weights(type, s.rows, s.cols, rng);
            const PackedWeight pw = pack_weight(w.view());
            ASSERT_EQ(pw.layout(), PackedWeight::Layout::bf16_tiles);
            const int64_t max_n = 70;
            const auto x = activations(max_n * s.cols, rng);
            const auto want = contract_reference(w, x, max_n);
            const std::string name = fmt::format("{} {}x{}{}", gguf::type_name(uint32_t(type)), s.rows, s.cols,
                                                 hardware ? " (hardware)" : "");
            for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 70}) {
                const std::vector<float> head(want.begin(), want.begin() + n * s.rows);
                expect_bitwise(product(pw, x.data(), n, n % 2 ? pool1 : pool2), head, s.rows, fmt::format("{} n {}", name, n));
                if (::testing::Test::HasFatalFailure()) return;
            }
            // Task sizes change the blocking, never a bit.
            for (int64_t mc : {16, 48, 1000})
                for (int64_t nc : {1, 40}) {
                    set_gemm_tiles({.kc = 512, .mc = mc, .nc = nc});
                    expect_bitwise(product(pw, x.data(), max_n, pool2), want, s.rows, fmt::format("{} mc {} nc {}", name, mc, nc));
                }
            set_gemm_tiles({});
        }
    // More tokens than one prefill task takes (at least 256): tasks that start past the first token
    // tile, and a tail tile of 2 tokens.
    const auto w = make_weights(GgmlType::F16, 33, 300, rng);
    const PackedWeight pw = pack_weight(w.view());
    const int64_t n = 290;
    const auto x = activations(n * 300, rng);
    const auto want = contract_reference(w, x, n);
    for (int64_t nc : {1, 64, 256})
        for (ThreadPool* pool : {&pool1, &pool2}) {
            set_gemm_tiles({.kc = 512, .mc = 32, .nc = nc});
            expect_bitwise(product(pw, x.data(), n, *pool), want, 33, fmt::format("F16 33x300 n {} nc {}{}", n, nc, hardware ? " (hardware)" : ""));
        }
    set_gemm_tiles({});
}

TEST(AmxBf16Matmul, EmulatedTilesMatchTheContractBitwiseAtEveryBatchSize) {
    if (!avx512_here()) GTEST_SKIP() << "no AVX-512 (the kernel's activation rounding and epilogue)";
    Bf16TilesGuard guard;
    contract_at_every_count(false);
}

TEST(AmxBf16Matmul, HardwareTilesMatchTheContractBitwiseAtEveryBatchSize) {
    if (!avx512_here() || !amx_bf16_hardware_available()) GTEST_SKIP() << kNoAmxBf16;
    Bf16TilesGuard guard;
    set_amx_emulation(false);
    contract_at_every_count(true);
}

// Each product carries at most (1 + 2^-8)^2 - 1 relative rounding (F16 weights and activations each
// rounded once to bf16; BF16 weights are exact: 2^-8), the chains add at most (cols + 2) * 2^-24
// of sum |w x|.
void within_rounding_bound(ThreadPool& pool) {
    std::mt19937 rng(52);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16})
        for (const Shape& s : kShapes) {
            const auto w = make_weights(type, s.rows, s.cols, rng);
            const int64_t n = 19;
            const auto x = random_activations(n * s.cols, rng);
            const auto y = product(pack_weight(w.view()), x.data(), n, pool);
            std::vector<float> exact(y.size()), row(size_t(s.cols));
            matmul_reference(w.view(), x.data(), n, exact.data());
            const double e_round = type == GgmlType::F16 ? 2.0 / 256 + 1.0 / (256.0 * 256) : 1.0 / 256;
            const double bound = e_round + double(s.cols + 2) / 16777216.0;
            for (int64_t r = 0; r < s.rows; ++r) {
                dequantize_row(w.view(), r, row.data());
                for (int64_t t = 0; t < n; ++t) {
                    double abs_sum = 0;
                    for (int64_t c = 0; c < s.cols; ++c) abs_sum += std::abs(double(row[size_t(c)]) * x[size_t(t * s.cols + c)]);
                    ASSERT_LE(std::abs(double(y[size_t(t * s.rows + r)]) - exact[size_t(t * s.rows + r)]), bound * abs_sum + 1e-30)
                        << gguf::type_name(uint32_t(type)) << " " << s.rows << "x" << s.cols << " row " << r << " token " << t;
                }
            }
        }
}

TEST(AmxBf16Matmul, EmulatedWithinTheRoundingBoundOfTheExactProduct) {
    if (!avx512_here()) GTEST_SKIP() << "no AVX-512";
    Bf16TilesGuard guard;
    ThreadPool pool(2);
    within_rounding_bound(pool);
}

TEST(AmxBf16Matmul, HardwareWithinTheRoundingBoundOfTheExactProduct) {
    if (!avx512_here() || !amx_bf16_hardware_available()) GTEST_SKIP() << kNoAmxBf16;
    Bf16TilesGuard guard;
    set_amx_emulation(false);
    ThreadPool pool(2);
    within_rounding_bound(pool);
}

// The packed bytes: panel p, K tile k, row j (pair 16k + j), dword i = row 16p + i's bf16 pair; zero
// past the columns (odd width, K padding) and past the rows.
TEST(AmxBf16Matmul, PacksTheBf16PanelsPaddedToWholeKTiles) {
    if (!avx512_here()) GTEST_SKIP() << "no AVX-512";
    Bf16TilesGuard guard;
    std::mt19937 rng(53);
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16}) {
        const int64_t rows = 21, cols = 35;  // 2 panels, 18 pairs: 2 K tiles
        const auto w = make_weights(type, rows, cols, rng);
        const PackedWeight pw = pack_weight(w.view());
        ASSERT_EQ(pw.layout(), PackedWeight::Layout::bf16_tiles);
        ASSERT_EQ(pw.packed_bytes(), size_t(2 * 2 * 1024));
        for (int64_t p = 0; p < 2; ++p)
            for (int64_t pair = 0; pair < 32; ++pair)
                for (int64_t i = 0; i < 16; ++i) {
                    const int64_t r = 16 * p + i;
                    uint16_t got[2];
                    std::memcpy(got, pw.data() + p * 2048 + pair * 64 + i * 4, 4);
                    for (int h = 0; h < 2; ++h) {
                        const int64_t c = 2 * pair + h;
                        const uint16_t want = r < rows && c < cols ? weight_bf16(w, r, c) : 0;
                        ASSERT_EQ(got[h], want) << gguf::type_name(uint32_t(type)) << " row " << r << " col " << c;
                    }
                }
    }
}

// Q, K and V stacked: each part's outputs bit for bit as alone (panels straddle the parts).
TEST(AmxBf16Matmul, StackedPartsEqualSeparateProducts) {
    if (!avx512_here()) GTEST_SKIP() << "no AVX-512";
    Bf16TilesGuard guard;
    ThreadPool pool(2);
    std::mt19937 rng(54);
    const int64_t cols = 96, n = 20;
    const auto q = make_weights(GgmlType::F16, 24, cols, rng), k = make_weights(GgmlType::F16, 9, cols, rng),
               v = make_weights(GgmlType::F16, 9, cols, rng);
    const WeightView parts[] = {q.view(), k.view(), v.view()};
    const PackedWeight stacked = pack_weights(parts);
    const auto x = random_activations(n * cols, rng);
    const auto y = product(stacked, x.data(), n, pool);
    int64_t offset = 0;
    for (const auto* part : {&q, &k, &v}) {
        const auto alone = product(pack_weight(part->view()), x.data(), n, pool);
        for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < part->rows; ++r)
                ASSERT_EQ(float_to_bits(y[size_t(t * 42 + offset + r)]), float_to_bits(alone[size_t(t * part->rows + r)]))
                    << "token " << t << " part row " << r;
        offset += part->rows;
    }
}

// Where the tiles cannot run (no AMX-BF16 and no emulation, PAGODA_AMX=0, a path below avx512) the
// method packs nothing and multiplies the view with f32 FMA, and a plan naming it is refused.
TEST(AmxBf16Matmul, NeverUsedWhereItCannotRun) {
    Bf16TilesGuard guard;
    std::mt19937 rng(55);
    const auto w = make_weights(GgmlType::F16, 20, 64, rng);
    ThreadPool pool(2);
    const auto x = random_activations(3 * 64, rng);
    set_amx_enabled(false);
    EXPECT_FALSE(bf16_tiles_available());
    EXPECT_FALSE(method_runs_here(PathMethod::amx_bf16));
    auto check_view = [&](const char* why) {
        const PackedWeight pw = pack_weight(w.view());
        EXPECT_EQ(pw.layout(), PackedWeight::Layout::view) << why;
        const uint64_t before = amx_bf16_dispatch_count();
        std::vector<float> y(3 * 20), want(3 * 20);
        matmul(pw, x.data(), 3, y.data(), pool);
        matmul(w.view(), x.data(), 3, want.data(), pool);
        EXPECT_EQ(amx_bf16_dispatch_count(), before) << why;
        EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << why;
    };
    check_view("PAGODA_AMX=0");
    set_amx_enabled(true);
    set_amx_emulation(false);
    if (!amx_bf16_hardware_available()) {
        EXPECT_FALSE(method_runs_here(PathMethod::amx_bf16));
        check_view("no AMX-BF16");
        KernelPlan plan;
        plan.types.push_back({GgmlType::F16, PathMethod::amx_bf16, {}, std::nullopt});
        try {
            validate_kernel_plan(plan);
            ADD_FAILURE() << "a plan with amx_bf16 was accepted on a host without it";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("needs AMX-BF16 tiles"), std::string::npos) << e.what();
        }
        EXPECT_NE(amx_bf16_status().find("absent ("), std::string::npos) << amx_bf16_status();
    }
    set_amx_emulation(true);
    if (!avx512_here()) check_view("no AVX-512 (emulation on)");
    if (best_supported_isa() >= Isa::avx2) {
        set_isa(Isa::avx2);
        check_view("PAGODA_ISA=avx2");
    }
    // F32 weights have no bf16 panels under any method.
    set_isa(best_supported_isa());
    const auto f32 = make_weights(GgmlType::F32, 20, 64, rng);
    EXPECT_EQ(pack_weight(f32.view()).layout(), PackedWeight::Layout::view);
    EXPECT_FALSE(method_applies(PathMethod::amx_bf16, GgmlType::F32));
}

TEST(AmxBf16Matmul, CpuidBitsDecide) {
    const uint32_t tile = 1u << 24, bf16 = 1u << 22, int8 = 1u << 25;
    const uint64_t state = uint64_t(3) << 17;
    EXPECT_EQ(amx_bf16_missing(tile | bf16, state), nullptr);
    EXPECT_STREQ(amx_bf16_missing(tile | int8, state), "CPUID: no amx_bf16");
    EXPECT_STREQ(amx_bf16_missing(bf16, state), "CPUID: no amx_tile");
    EXPECT_NE(amx_bf16_missing(tile | bf16, uint64_t(1) << 17), nullptr);
    EXPECT_EQ(amx_missing(tile | int8, state), nullptr);  // int8 alone still enables the int8 tiles
}

}  // namespace
}  // namespace pagoda::backend::cpu
