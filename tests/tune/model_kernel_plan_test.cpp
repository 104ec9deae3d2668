// A model's own kernel plan (StepModelOptions::kernel_plan): a target and a draft model opened in one
// process with different plans (one sends Q8_0 down the int8 panels, int8_dot; the other dequantises
// to f32, dequant_fma) run their steps interleaved, one decode of each in turn, while the process
// plan flips between the steps: each gives, bit for bit, the logits it gives alone under the process
// plan of its method, and each step dispatches its own method only. And --draft-profile's reader
// (tune::model_kernel_plan): a profile measured here gives its plan without installing it; a
// missing file or one from another machine is refused naming the flag.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cpu/matmul_test_util.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "tiny_q8_model.h"
#include "tune/profile.h"
#include "tune/profile_use.h"

namespace pagoda::tune {
namespace {

using backend::cpu::KernelPlan;
using backend::cpu::PathMethod;
using gguf::GgmlType;

KernelPlan plan_of(PathMethod m) {
    KernelPlan p;
    p.types.push_back({GgmlType::Q8_0, m, {backend::cpu::RangeTiles{}}});  // one range: a profile lists at least one
    return p;
}

struct Guard {
    backend::cpu::testing::KernelConfigGuard config;
    ~Guard() { backend::cpu::clear_kernel_plan(); }
};

const std::vector<int32_t> kPrompt = {5, 17, 42, 8, 99};
const std::vector<int32_t> kDecoded = {3, 77, 150, 21, 64, 9};

// The prompt's last logits, then each decoded token's, of `model` alone.
std::vector<std::vector<float>> run_alone(model::StepModel& m) {
    model::SequenceRunner r(m, false);
    std::vector<std::vector<float>> out{r.prefill(0, kPrompt)};
    for (int32_t t : kDecoded) out.push_back(r.decode(0, t));
    return out;
}

model::StepModelOptions options(std::shared_ptr<const KernelPlan> plan) {
    return {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64,
            .kernel_plan = std::move(plan)};
}

TEST(ModelKernelPlan, TargetAndDraftKeepTheirPlansInterleaved) {
    if (std::getenv("PAGODA_QUANT_METHOD")) GTEST_SKIP() << "PAGODA_QUANT_METHOD pins the quantised method (it wins over the plan)";
    Guard guard;
    const std::string path = test::tiny_q8_model();
    const PathMethod methods[] = {PathMethod::int8_dot, PathMethod::dequant_fma};
    // Each model alone under the process plan of its method: the oracle.
    std::vector<std::vector<float>> alone[2];
    for (int i = 0; i < 2; ++i) {
        backend::cpu::set_kernel_plan(plan_of(methods[i]));
        auto m = model::open_step_model(path, options(nullptr));
        alone[i] = run_alone(*m);
        backend::cpu::clear_kernel_plan();
    }
    ASSERT_NE(alone[0], alone[1]) << "the two methods must give different bits, or the test shows nothing";
    // Both open under a process plan naming neither's method for the other (then flipped each step).
    backend::cpu::set_kernel_plan(plan_of(PathMethod::dequant_fma));
    auto target = model::open_step_model(path, options(std::make_shared<const KernelPlan>(plan_of(methods[0]))));
    auto draft = model::open_step_model(path, options(std::make_shared<const KernelPlan>(plan_of(methods[1]))));
    model::SequenceRunner runners[2] = {model::SequenceRunner(*target, false), model::SequenceRunner(*draft, false)};
    std::vector<std::vector<float>> got[2];
    for (int step = 0; step <= int(kDecoded.size()); ++step) {
        for (int i = 0; i < 2; ++i) {
            backend::cpu::set_kernel_plan(plan_of(methods[(step + i) % 2]));  // reaches neither model
            const uint64_t before[2] = {backend::cpu::dispatch_count(methods[0]), backend::cpu::dispatch_count(methods[1])};
            got[i].push_back(step == 0 ? runners[i].prefill(0, kPrompt) : runners[i].decode(0, kDecoded[size_t(step - 1)]));
            EXPECT_GT(backend::cpu::dispatch_count(methods[i]), before[i]) << "model " << i << " step " << step;
            EXPECT_EQ(backend::cpu::dispatch_count(methods[1 - i]), before[1 - i]) << "model " << i << " step " << step;
        }
    }
    for (int i = 0; i < 2; ++i) EXPECT_EQ(got[i], alone[i]) << "model " << i;
}

TEST(ModelKernelPlan, DraftProfileGivesItsPlanWithoutInstallingIt) {
    Guard guard;
    Profile p;
    p.machine = current_machine();
    p.model_path = test::tiny_q8_model();
    p.plan = plan_of(PathMethod::dequant_fma);
    const std::string path = pagoda::test::temp_path("model-kernel-plan-profile.json");
    write_profile_file(p, path);
    const auto plan = model_kernel_plan(path, "", "--draft-profile");
    ASSERT_NE(plan, nullptr);
    ASSERT_EQ(plan->types.size(), 1u);
    EXPECT_EQ(plan->types[0].method, PathMethod::dequant_fma);
    EXPECT_FALSE(backend::cpu::has_kernel_plan());
    auto error_of = [](const std::string& file) {
        try {
            (void)model_kernel_plan(file, "", "--draft-profile");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    EXPECT_NE(error_of(path + ".missing").find("--draft-profile " + path + ".missing: no such file"), std::string::npos)
        << error_of(path + ".missing");
    p.machine.cpu_model += " (another)";
    write_profile_file(p, path);
    EXPECT_NE(error_of(path).find("--draft-profile " + path), std::string::npos) << error_of(path);
}

}  // namespace
}  // namespace pagoda::tune
