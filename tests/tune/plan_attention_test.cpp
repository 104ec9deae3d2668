// The kernel plan's attention method: a plan naming amx_bf16 installs it for the process (on the
// emulated tiles here, which run on any AVX-512 host), a plan without one and clear_kernel_plan put
// simd back, PAGODA_ATTENTION wins over the plan, and a plan naming amx_bf16 where it cannot run
// (PAGODA_AMX off, or an ISA other than avx512) is refused before anything is installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"

namespace pagoda::backend::cpu {
namespace {

struct Guards {
    testing::KernelConfigGuard config;
    testing::AmxGuard amx;
    ~Guards() { clear_kernel_plan(); }
};

KernelPlan attention_plan(std::optional<AttentionMethod> m) {
    KernelPlan p;
    p.attention = m;
    return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(KernelPlanAttention, APlanInstallsItsAttentionMethod) {
    if (best_supported_isa() != Isa::avx512) GTEST_SKIP() << "AMX bf16 attention runs on the avx512 path, which this CPU lacks";
    if (std::getenv("PAGODA_ATTENTION")) GTEST_SKIP() << "PAGODA_ATTENTION pins the attention method (it wins over the plan)";
    Guards guards;
    set_isa(Isa::avx512);
    set_amx_enabled(true);
    set_amx_emulation(true);
    ASSERT_TRUE(amx_attention_runs_here());

    set_kernel_plan(attention_plan(AttentionMethod::amx_bf16));
    EXPECT_EQ(attention_method(), AttentionMethod::amx_bf16);
    EXPECT_TRUE(amx_attention_applies(KvDtype::f16, 0, 0.0f));
    EXPECT_TRUE(contains(describe_kernel_plan(), "attention: amx_bf16 (profile) (emulated tiles)")) << describe_kernel_plan();

    set_kernel_plan(attention_plan(std::nullopt));  // a plan that chose none: simd
    EXPECT_EQ(attention_method(), AttentionMethod::simd);
    EXPECT_FALSE(amx_attention_applies(KvDtype::f16, 0, 0.0f));
    EXPECT_TRUE(contains(describe_kernel_plan(), "attention: simd")) << describe_kernel_plan();

    set_kernel_plan(attention_plan(AttentionMethod::amx_bf16));
    clear_kernel_plan();
    EXPECT_EQ(attention_method(), AttentionMethod::simd);
    EXPECT_TRUE(contains(describe_kernel_plan(), "no profile") && contains(describe_kernel_plan(), "attention: simd"))
        << describe_kernel_plan();
}

TEST(KernelPlanAttention, TheEnvironmentWinsOverThePlan) {
    if (best_supported_isa() != Isa::avx512) GTEST_SKIP() << "AMX bf16 attention runs on the avx512 path, which this CPU lacks";
    Guards guards;
    set_isa(Isa::avx512);
    set_amx_enabled(true);
    set_amx_emulation(true);
    set_attention_method(std::nullopt);  // nothing installed: the environment or a plan decides
    const char* old = std::getenv("PAGODA_ATTENTION");
    const std::string saved = old ? old : "";
    setenv("PAGODA_ATTENTION", "simd", 1);
    set_kernel_plan(attention_plan(AttentionMethod::amx_bf16));
    EXPECT_EQ(attention_method(), AttentionMethod::simd);
    const std::string described = describe_kernel_plan();
    if (old) setenv("PAGODA_ATTENTION", saved.c_str(), 1);
    else unsetenv("PAGODA_ATTENTION");
    EXPECT_TRUE(contains(described, "attention: simd (PAGODA_ATTENTION, over the profile's amx_bf16)")) << described;
}

TEST(KernelPlanAttention, RefusedWhereAmxBf16CannotRun) {
    Guards guards;
    auto refused = [](const std::string& why) {
        try {
            set_kernel_plan(attention_plan(AttentionMethod::amx_bf16));
            ADD_FAILURE() << "accepted " << why;
        } catch (const Error& e) {
            EXPECT_TRUE(contains(e.what(), "attention method amx_bf16 needs AMX-BF16 tiles")) << e.what();
        }
        EXPECT_FALSE(has_kernel_plan()) << why;
    };
    // PAGODA_AMX off stops the tiles on every host, hardware or emulated.
    set_amx_enabled(false);
    set_amx_emulation(true);
    ASSERT_FALSE(amx_attention_runs_here());
    refused("with AMX switched off");
    // So does a path other than avx512, with AMX on.
    set_amx_enabled(true);
    set_isa(Isa::scalar);
    ASSERT_FALSE(amx_attention_runs_here());
    refused("on the scalar path");
    // simd, or no choice, runs anywhere.
    EXPECT_NO_THROW(validate_kernel_plan(attention_plan(AttentionMethod::simd)));
    EXPECT_NO_THROW(validate_kernel_plan(attention_plan(std::nullopt)));
}

}  // namespace
}  // namespace pagoda::backend::cpu
