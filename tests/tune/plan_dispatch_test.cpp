// The kernel plan steers the CPU backend per weight type: a plan with dequant_fma for Q4_0 and
// int8_dot for Q8_0 makes each matmul take its planned path — seen in the dispatch counters, in
// describe_matmul, and bit for bit in the results against the kernels called directly with that
// method — and each agrees with matmul_reference within its path's tolerance. Tiles per token range
// never change a result, so a token's outputs do not depend on its step's range. PAGODA_QUANT_METHOD (an env override) wins over the plan.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"

namespace pagoda::backend::cpu {
namespace {

using gguf::GgmlType;
using testing::make_weights;
using testing::random_activations;

struct PlanGuard {
    testing::KernelConfigGuard config;
    ~PlanGuard() { clear_kernel_plan(); }
};

TypePlan plan_for(GgmlType type, PathMethod m, std::vector<RangeTiles> ranges = {}) { return {type, m, std::move(ranges)}; }

// y = W x through the CPU backend's Backend interface (upload + matmul op).
std::vector<float> backend_matmul(backend::Backend& be, const testing::RandomWeights& w, std::vector<float> x, int64_t n,
                                  std::string* described = nullptr) {
    auto weight = be.upload_weight({backend::MatrixSource{w.type, w.bytes.data(), w.rows, w.cols}}, backend::WeightUse::matmul);
    std::vector<float> y(size_t(n * w.rows));
    const backend::Tensor out{y.data(), n, w.rows};
    be.matmul(*weight, backend::Tensor{x.data(), n, w.cols}, std::span(&out, 1));
    if (described) *described = be.describe_matmul(*weight, n);
    return y;
}

// The arithmetic the backend says a matmul of w over n rows runs on (the peak `pagoda bench` uses).
backend::MatmulArithmetic arithmetic_of(backend::Backend& be, const testing::RandomWeights& w, int64_t n) {
    auto weight = be.upload_weight({backend::MatrixSource{w.type, w.bytes.data(), w.rows, w.cols}}, backend::WeightUse::matmul);
    return be.matmul_arithmetic(*weight, n);
}

std::vector<float> direct(const testing::RandomWeights& w, const std::vector<float>& x, int64_t n, QuantMethod m, ThreadPool& pool) {
    set_quant_method(m);
    const PackedWeight p = pack_weight(w.view());
    std::vector<float> y(size_t(n * w.rows));
    matmul(p, x.data(), n, y.data(), pool);
    return y;
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double scale = 0, worst = 0;
    for (float v : want) scale = std::max(scale, double(std::fabs(v)));
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / scale);
    return worst;
}

TEST(KernelPlan, EachTypeTakesItsPlannedMethod) {
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method (it wins over the plan)";
    PlanGuard guard;
    std::mt19937 rng(7);
    const int64_t rows = 48, cols = 256, n = 5;
    const auto q4 = make_weights(GgmlType::Q4_0, rows, cols, rng);
    const auto q8 = make_weights(GgmlType::Q8_0, rows, cols, rng);
    const auto x = random_activations(n * cols, rng);
    ThreadPool pool(2);
    const auto q4_fma = direct(q4, x, n, QuantMethod::dequant_fma, pool), q4_int8 = direct(q4, x, n, QuantMethod::int8_dot, pool);
    const auto q8_fma = direct(q8, x, n, QuantMethod::dequant_fma, pool), q8_int8 = direct(q8, x, n, QuantMethod::int8_dot, pool);
    ASSERT_NE(q4_fma, q4_int8) << "the two methods must be told apart by their bits";
    ASSERT_NE(q8_fma, q8_int8);

    // The process default is int8_dot for both; the plan moves Q4_0 to dequant_fma only.
    set_quant_method(QuantMethod::int8_dot);
    set_kernel_plan({{plan_for(GgmlType::Q4_0, PathMethod::dequant_fma), plan_for(GgmlType::Q8_0, PathMethod::int8_dot)}});
    auto be = backend::make_backend("cpu", {.n_threads = 2});
    const uint64_t fma0 = dispatch_count(PathMethod::dequant_fma), int80 = dispatch_count(PathMethod::int8_dot);
    std::string d4, d8;
    const auto y4 = backend_matmul(*be, q4, x, n, &d4);
    EXPECT_EQ(dispatch_count(PathMethod::dequant_fma), fma0 + 1);
    const auto y8 = backend_matmul(*be, q8, x, n, &d8);
    EXPECT_EQ(dispatch_count(PathMethod::int8_dot), int80 + 1);
    EXPECT_EQ(y4, q4_fma);
    EXPECT_EQ(y8, q8_int8);
    EXPECT_NE(d4.find("f32 fma"), std::string::npos) << d4;
    EXPECT_EQ(d8.find("f32 fma"), std::string::npos) << d8;
    // The arithmetic follows the same plan: Q4_0's fp32 FMA, Q8_0's int8 (dot or AMX tiles); the
    // reference backend states none (no measured peak bounds its plain loops).
    EXPECT_EQ(arithmetic_of(*be, q4, n), backend::MatmulArithmetic::f32);
    const backend::MatmulArithmetic a8 = arithmetic_of(*be, q8, n);
    EXPECT_TRUE(a8 == backend::MatmulArithmetic::int8 || a8 == backend::MatmulArithmetic::amx_int8)
        << backend::matmul_arithmetic_name(a8);
    EXPECT_EQ(arithmetic_of(*backend::make_backend("reference"), q8, n), backend::MatmulArithmetic::unmeasured);

    // And against the reference: dequant_fma only reorders f32 sums; int8 rounds the activations.
    std::vector<float> r4(y4.size()), r8(y8.size());
    matmul_reference(q4.view(), x.data(), n, r4.data());
    matmul_reference(q8.view(), x.data(), n, r8.data());
    EXPECT_LT(worst_relative(y4, r4), 1e-5);
    EXPECT_LT(worst_relative(y8, r8), 2e-2);

    // The plan the other way round swaps the bits.
    set_kernel_plan({{plan_for(GgmlType::Q4_0, PathMethod::int8_dot), plan_for(GgmlType::Q8_0, PathMethod::dequant_fma)}});
    auto be2 = backend::make_backend("cpu", {.n_threads = 2});
    EXPECT_EQ(backend_matmul(*be2, q4, x, n), q4_int8);
    EXPECT_EQ(backend_matmul(*be2, q8, x, n), q8_fma);
}

TEST(KernelPlan, TilesPerRangeNeverChangeAResult) {
    PlanGuard guard;
    std::mt19937 rng(11);
    for (GgmlType type : {GgmlType::F16, GgmlType::Q4_K}) {
        const int64_t rows = 40, cols = 512;
        const auto w = make_weights(type, rows, cols, rng);
        const PathMethod m = type == GgmlType::F16 ? PathMethod::f32_fma : PathMethod::int8_dot;
        for (int64_t n : {1, 3, 9, 70}) {
            const auto x = random_activations(n * cols, rng);
            set_kernel_plan({{plan_for(type, m)}});
            auto be = backend::make_backend("cpu", {.n_threads = 2});
            const auto plain = backend_matmul(*be, w, x, n);
            set_kernel_plan({{plan_for(type, m, {{1, {256, 16, 5}}, {8, {1024, 64, 3}}, {64, {256, 8, 17}}, {INT64_MAX, {768, 128, 33}}})}});
            auto tiled = backend::make_backend("cpu", {.n_threads = 2});
            EXPECT_EQ(backend_matmul(*tiled, w, x, n), plain) << gguf::type_name(uint32_t(type)) << " n=" << n;
            const KernelChoice c = kernel_choice(type, n);
            const int64_t want_kc = n == 1 ? 256 : n <= 8 ? 1024 : n <= 64 ? 256 : 768;
            EXPECT_EQ(c.tiles.kc, want_kc) << n;
        }
        // Batch invariance under the plan: a token's outputs are the same whether its step had 70
        // tokens (65+ range, its tiles) or just it (range 1, other tiles).
        const int64_t n = 70;
        const auto x = random_activations(n * cols, rng);
        set_kernel_plan({{plan_for(type, m, {{1, {256, 16, 5}}, {8, {1024, 64, 3}}, {64, {256, 8, 17}}, {INT64_MAX, {768, 128, 33}}})}});
        auto be = backend::make_backend("cpu", {.n_threads = 2});
        const auto all = backend_matmul(*be, w, x, n);
        for (int64_t t : {0, 33, 69}) {
            const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
            const auto one = backend_matmul(*be, w, xt, 1);
            EXPECT_EQ(one, std::vector<float>(all.begin() + t * rows, all.begin() + (t + 1) * rows))
                << gguf::type_name(uint32_t(type)) << " token " << t;
        }
    }
}

TEST(KernelPlan, EnvOverrideWinsOverThePlan) {
    PlanGuard guard;
    const char* old = std::getenv("PAGODA_QUANT_METHOD");
    const std::string saved = old ? old : "";
    setenv("PAGODA_QUANT_METHOD", "int8_dot", 1);
    set_quant_method(QuantMethod::int8_dot);
    set_kernel_plan({{plan_for(GgmlType::Q4_0, PathMethod::dequant_fma)}});
    EXPECT_EQ(kernel_choice(GgmlType::Q4_0, 1).method, PathMethod::int8_dot);
    EXPECT_NE(describe_kernel_plan().find("env override of dequant_fma"), std::string::npos) << describe_kernel_plan();
    if (old) setenv("PAGODA_QUANT_METHOD", saved.c_str(), 1);
    else unsetenv("PAGODA_QUANT_METHOD");
    EXPECT_EQ(kernel_choice(GgmlType::Q4_0, 1).method, PathMethod::dequant_fma);
}

TEST(KernelPlan, RefusesPlansItCannotRun) {
    PlanGuard guard;
    auto refuses = [](const KernelPlan& p, const std::string& words) {
        try {
            set_kernel_plan(p);
            ADD_FAILURE() << "accepted; expected: " << words;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    refuses({{plan_for(GgmlType::F16, PathMethod::int8_dot)}}, "cannot multiply f16");
    refuses({{plan_for(GgmlType::Q4_0, PathMethod::f32_fma)}}, "cannot multiply q4_0");
    refuses({{plan_for(GgmlType::Q4_0, PathMethod::int8_dot), plan_for(GgmlType::Q4_0, PathMethod::int8_dot)}}, "listed twice");
    refuses({{plan_for(GgmlType::Q8_0, PathMethod::int8_dot, {{8, {}}, {4, {}}, {INT64_MAX, {}}})}}, "must increase");
    refuses({{plan_for(GgmlType::Q8_0, PathMethod::int8_dot, {{8, {}}})}}, "open-ended");
    refuses({{plan_for(GgmlType::Q8_0, PathMethod::int8_dot, {{INT64_MAX, {0, 32, 64}}})}}, "must be positive");
    if (!method_runs_here(PathMethod::bf16_dot))
        refuses({{plan_for(GgmlType::F16, PathMethod::bf16_dot)}}, "needs AVX-512 BF16");
    refuses({{{GgmlType::F16, PathMethod::f32_fma, {}, 32}}}, "an AMX threshold applies only to int8_dot on q4_0");
    refuses({{{GgmlType::Q4_0, PathMethod::dequant_fma, {}, 32}}}, "(not q4_0 dequant_fma)");
    refuses({{{GgmlType::Q5_1, PathMethod::int8_dot, {}, 32}}}, "(not q5_1 int8_dot)");
    refuses({{{GgmlType::Q4_0, PathMethod::int8_dot, {}, std::nullopt, 16}}}, "the wide-kernel threshold of q4_0 must be at least 17");
    refuses({{{GgmlType::F16, PathMethod::f32_fma, {}, std::nullopt, 32}}}, "a wide-kernel threshold applies only to int8_dot");
    refuses({{{GgmlType::Q4_0, PathMethod::int8_dot, {}, 0}}}, "the AMX threshold of q4_0 must be at least 1 token");
    EXPECT_FALSE(has_kernel_plan());
    EXPECT_NE(describe_kernel_plan().find("default"), std::string::npos);
}

// Why the VNNI panel path cannot be tested here ("" where it can), and pinning it (AMX on or off;
// the caller holds the PlanGuard and AmxGuard that restore both).
std::string vnni_panels_skip() {
    if (!(best_supported_isa() == Isa::avx512 && cpu_features().avx512vnni)) return "no AVX-512 VNNI";
    if (std::getenv("PAGODA_QUANT_METHOD")) return "PAGODA_QUANT_METHOD pins the quantised method";
    return "";
}
void pin_vnni_panels(bool amx) {
    set_isa(Isa::avx512);
    set_quant_method(QuantMethod::int8_dot);
    set_amx_enabled(amx);
}

// The plan's AMX threshold reaches the packed matmul through the backend: below it the VNNI panels,
// from it the (here emulated) tiles, the same bytes for every token either way, and the log line
// says so. Without AMX (PAGODA_AMX=0) the same step stays on the panels.
TEST(KernelPlan, TheAmxThresholdSwitchesPathsNotBits) {
    if (const std::string why = vnni_panels_skip(); !why.empty()) GTEST_SKIP() << why;
    PlanGuard guard;
    testing::AmxGuard amx;
    pin_vnni_panels(true);
    set_amx_emulation(true);
    std::mt19937 rng(12);
    const int64_t rows = 40, cols = 512;
    const auto w = make_weights(GgmlType::Q4_K, rows, cols, rng);
    const auto x = random_activations(40 * cols, rng);
    set_kernel_plan({{{GgmlType::Q4_K, PathMethod::int8_dot, {}, 20}}});
    EXPECT_EQ(kernel_choice(GgmlType::Q4_K, 3).amx_min_tokens, 20);
    EXPECT_EQ(kernel_choice(GgmlType::Q8_0, 3).amx_min_tokens, kDefaultAmxMinTokens) << "a type the plan does not list";
    EXPECT_NE(describe_kernel_plan().find("AMX int8 tiles (emulated): packed int8 matmuls of 32+ tokens, q4_K: 20+"),
              std::string::npos)
        << describe_kernel_plan();
    auto be = backend::make_backend("cpu", {.n_threads = 2});
    uint64_t count = amx_dispatch_count();
    std::string d19, d20;
    const auto y19 = backend_matmul(*be, w, std::vector<float>(x.begin(), x.begin() + 19 * cols), 19, &d19);
    EXPECT_EQ(amx_dispatch_count(), count);
    const auto y40 = backend_matmul(*be, w, x, 40, &d20);
    EXPECT_EQ(amx_dispatch_count(), count + 1);
    EXPECT_NE(d19.find("vpdpbusd"), std::string::npos) << d19;
    EXPECT_NE(d20.find("AMX tiles (emulated)"), std::string::npos) << d20;
    EXPECT_EQ(y19, std::vector<float>(y40.begin(), y40.begin() + 19 * rows));
    set_amx_enabled(false);
    EXPECT_NE(describe_kernel_plan().find("AMX int8 tiles: not used, disabled by PAGODA_AMX=0"), std::string::npos)
        << describe_kernel_plan();
    count = amx_dispatch_count();
    EXPECT_EQ(backend_matmul(*be, w, x, 40), y40);
    EXPECT_EQ(amx_dispatch_count(), count);
}

// The plan's wide-kernel threshold reaches the packed matmul through the backend: below it the
// narrow VNNI kernel, from it the wide one, the same bytes for every token either way.
TEST(KernelPlan, TheWideThresholdSwitchesPathsNotBits) {
    if (const std::string why = vnni_panels_skip(); !why.empty()) GTEST_SKIP() << why;
    PlanGuard guard;
    testing::AmxGuard amx;
    pin_vnni_panels(false);  // no AMX: steps this size would otherwise take the tiles where they run
    std::mt19937 rng(13);
    const int64_t rows = 40, cols = 512;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
        SCOPED_TRACE(gguf::type_name(uint32_t(type)));
        const auto w = make_weights(type, rows, cols, rng);
        const auto x = random_activations(40 * cols, rng);
        set_kernel_plan({{{type, PathMethod::int8_dot, {}, std::nullopt, 24}}});
        EXPECT_EQ(kernel_choice(type, 3).wide_min_tokens, 24);
        auto be = backend::make_backend("cpu", {.n_threads = 2});
        uint64_t count = wide_dispatch_count();
        const auto y20 = backend_matmul(*be, w, std::vector<float>(x.begin(), x.begin() + 20 * cols), 20);
        EXPECT_EQ(wide_dispatch_count(), count) << "20 tokens: below the plan's 24";
        const auto y40 = backend_matmul(*be, w, x, 40);
        EXPECT_EQ(wide_dispatch_count(), count + 1);
        EXPECT_EQ(y20, std::vector<float>(y40.begin(), y40.begin() + 20 * rows));
        // A backend keeps the plan installed when it was made (kernel_plan.h): a new one takes the next.
        set_kernel_plan({{{type, PathMethod::int8_dot, {}, std::nullopt, kNeverMinTokens}}});
        count = wide_dispatch_count();
        EXPECT_EQ(backend_matmul(*be, w, x, 40), y40) << "the first backend keeps its plan";
        EXPECT_EQ(wide_dispatch_count(), count + 1);
        auto never = backend::make_backend("cpu", {.n_threads = 2});
        count = wide_dispatch_count();
        EXPECT_EQ(backend_matmul(*never, w, x, 40), y40) << "the narrow kernel at 40 tokens";
        EXPECT_EQ(wide_dispatch_count(), count);
        clear_kernel_plan();
        EXPECT_EQ(kernel_choice(type, 3).wide_min_tokens, kDefaultWideMinTokens);
        auto by_default = backend::make_backend("cpu", {.n_threads = 2});
        EXPECT_EQ(backend_matmul(*by_default, w, x, 40), y40) << "the default: the wide kernel from 17 tokens";
        EXPECT_EQ(wide_dispatch_count(), count + 1);
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu
