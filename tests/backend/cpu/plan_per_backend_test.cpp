// The kernel plan is a CPU backend's own state (kernel_plan.h PlanSettings): two backends in one
// process, one made with a plan that sends the quantised types down the plain path (dequant_fma: f32
// FMA over dequantised rows) and one with a plan on the best path (int8_dot), run their matmuls
// interleaved call by call, each giving bit for bit what the kernels give under its method, whatever
// the other does and whatever process plan is installed between the calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_test_util.h"
#include "backend/cpu/plan/kernel_plan.h"
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

KernelPlan plan_of(PathMethod m) {
    KernelPlan p;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) p.types.push_back({t, m, {}});
    return p;
}

// y = W x by the packed kernels called directly under the method (the oracle of each backend).
std::vector<float> direct(const testing::RandomWeights& w, const std::vector<float>& x, int64_t n, QuantMethod m,
                          ThreadPool& pool) {
    set_quant_method(m);
    const PackedWeight p = pack_weight(w.view());
    std::vector<float> y(size_t(n * w.rows));
    matmul(p, x.data(), n, y.data(), pool);
    return y;
}

TEST(PlanPerBackend, TwoBackendsKeepTheirOwnPlansInterleaved) {
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method (it wins over the plan)";
    PlanGuard guard;
    std::mt19937 rng(23);
    const int64_t rows = 40, cols = 256;
    const testing::RandomWeights weights[] = {make_weights(GgmlType::Q4_0, rows, cols, rng),
                                              make_weights(GgmlType::Q8_0, rows, cols, rng)};
    auto plain = make_cpu_backend({.n_threads = 2}, plan_settings(plan_of(PathMethod::dequant_fma)));
    auto best = make_cpu_backend({.n_threads = 2}, plan_settings(plan_of(PathMethod::int8_dot)));
    std::vector<std::shared_ptr<Weight>> plain_w, best_w;
    for (const auto& w : weights) {
        const MatrixSource source{w.type, w.bytes.data(), w.rows, w.cols};
        plain_w.push_back(plain->upload_weight({source}, WeightUse::matmul));
        best_w.push_back(best->upload_weight({source}, WeightUse::matmul));
    }
    // Each backend says the path of its own plan.
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_NE(plain->describe_matmul(*plain_w[i], 3).find("f32 fma"), std::string::npos) << plain->describe_matmul(*plain_w[i], 3);
        EXPECT_EQ(best->describe_matmul(*best_w[i], 3).find("f32 fma"), std::string::npos) << best->describe_matmul(*best_w[i], 3);
        EXPECT_EQ(plain->matmul_arithmetic(*plain_w[i], 3), MatmulArithmetic::f32);
        EXPECT_NE(best->matmul_arithmetic(*best_w[i], 3), MatmulArithmetic::f32);
    }
    ThreadPool pool(2);
    int distinct = 0;
    for (int step = 0; step < 6; ++step) {
        // A process plan installed between the calls (the other way round each step) reaches neither.
        set_kernel_plan(plan_of(step % 2 ? PathMethod::dequant_fma : PathMethod::int8_dot));
        const int64_t n = step % 3 == 0 ? 1 : 2 + step;
        const size_t i = size_t(step % 2);
        const std::vector<float> x = random_activations(n * cols, rng);
        const uint64_t fma0 = dispatch_count(PathMethod::dequant_fma), int80 = dispatch_count(PathMethod::int8_dot);
        std::vector<float> y_plain(size_t(n * rows)), y_best(size_t(n * rows));
        const Tensor in{const_cast<float*>(x.data()), n, cols};
        const Tensor out_plain{y_plain.data(), n, rows}, out_best{y_best.data(), n, rows};
        best->matmul(*best_w[i], in, std::span(&out_best, 1));
        plain->matmul(*plain_w[i], in, std::span(&out_plain, 1));
        EXPECT_EQ(dispatch_count(PathMethod::dequant_fma), fma0 + 1) << "step " << step;
        EXPECT_EQ(dispatch_count(PathMethod::int8_dot), int80 + 1) << "step " << step;
        {
            const testing::KernelConfigGuard restore;  // direct() sets the process method
            EXPECT_EQ(y_plain, direct(weights[i], x, n, QuantMethod::dequant_fma, pool)) << "step " << step;
            EXPECT_EQ(y_best, direct(weights[i], x, n, QuantMethod::int8_dot, pool)) << "step " << step;
        }
        distinct += y_plain != y_best;
    }
    EXPECT_GT(distinct, 0) << "the two methods must be told apart by their bits";
}

// A plan's attention method and prefetches become the backend's own, unless their environment
// variable is set (it wins, as over an installed plan); a backend made without settings starts
// from the process's plan as installed when it is made.
TEST(PlanPerBackend, SettingsFromAPlanAndFromTheProcess) {
    PlanGuard guard;
    KernelPlan p = plan_of(PathMethod::dequant_fma);
    p.decode_kv_prefetch = true;
    p.weight_prefetch = WeightPrefetch::l1;
    p.types[0].ranges = {{INT64_MAX, {300, 32, 64}}};
    const PlanSettings s = plan_settings(p);
    ASSERT_NE(s.plan, nullptr);
    EXPECT_EQ(s.plan->types[0].ranges[0].tiles.kc, 512) << "tiles rounded as set_kernel_plan rounds them";
    if (!attention_method_in_environment()) {
        EXPECT_EQ(s.attention, AttentionMethod::simd) << "a plan that chose none: simd";
    } else {
        EXPECT_EQ(s.attention, std::nullopt) << "PAGODA_ATTENTION wins";
    }
    if (!decode_kv_prefetch_in_environment()) {
        EXPECT_EQ(s.decode_kv_prefetch, true);
    }
    if (!weight_prefetch_in_environment()) {
        EXPECT_EQ(s.weight_prefetch, WeightPrefetch::l1);
    }
    EXPECT_EQ(kernel_choice(s, GgmlType::Q4_0, 1).weight_prefetch, s.weight_prefetch);
    EXPECT_EQ(process_plan_settings().plan, nullptr);
    set_kernel_plan(p);
    const PlanSettings from_process = process_plan_settings();
    ASSERT_NE(from_process.plan, nullptr);
    EXPECT_EQ(from_process.plan->types.size(), 2u);
    EXPECT_EQ(from_process.attention, std::nullopt) << "the process's attention method, read at each call";
    EXPECT_EQ(kernel_choice(from_process, GgmlType::Q4_0, 1).method, kernel_choice(GgmlType::Q4_0, 1).method);
    // A plan this machine cannot run is refused as set_kernel_plan refuses it.
    KernelPlan bad;
    bad.types.push_back({GgmlType::F16, PathMethod::int8_dot, {}});
    EXPECT_THROW(plan_settings(bad), Error);
}

}  // namespace
}  // namespace pagoda::backend::cpu
