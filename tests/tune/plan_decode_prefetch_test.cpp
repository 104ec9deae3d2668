// The kernel plan's decode KV prefetch (kernel_plan.h, attention.h): a plan installs its choice, a
// plan without one and clear_kernel_plan put "off" back, PAGODA_DECODE_PREFETCH wins over the plan,
// and a value other than 0 or 1 is an error naming the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "backend/cpu/attention/attention.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "env_guard.h"

namespace pagoda::backend::cpu {
namespace {

// PAGODA_DECODE_PREFETCH set (or unset: no value) for one scope; the plan cleared after.
struct EnvAndPlan {
    test::EnvGuard env;
    explicit EnvAndPlan(std::optional<std::string> value) : env("PAGODA_DECODE_PREFETCH", std::move(value)) {}
    ~EnvAndPlan() { clear_kernel_plan(); }
};

KernelPlan prefetch_plan(std::optional<bool> on) {
    KernelPlan p;
    p.decode_kv_prefetch = on;
    return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(KernelPlanDecodePrefetch, APlanInstallsItsChoice) {
    EnvAndPlan env(std::nullopt);
    EXPECT_FALSE(decode_kv_prefetch()) << "the default is off";
    set_kernel_plan(prefetch_plan(true));
    EXPECT_TRUE(decode_kv_prefetch());
    EXPECT_TRUE(contains(describe_kernel_plan(), "decode KV prefetch: on (profile)")) << describe_kernel_plan();
    set_kernel_plan(prefetch_plan(false));
    EXPECT_FALSE(decode_kv_prefetch());
    EXPECT_TRUE(contains(describe_kernel_plan(), "decode KV prefetch: off (profile)")) << describe_kernel_plan();
    set_kernel_plan(prefetch_plan(std::nullopt));  // not measured: off
    EXPECT_FALSE(decode_kv_prefetch());
    set_kernel_plan(prefetch_plan(true));
    clear_kernel_plan();
    EXPECT_FALSE(decode_kv_prefetch());
    EXPECT_TRUE(contains(describe_kernel_plan(), "no profile") && contains(describe_kernel_plan(), "decode KV prefetch: off"))
        << describe_kernel_plan();
}

TEST(KernelPlanDecodePrefetch, TheEnvironmentWinsOverThePlan) {
    {
        EnvAndPlan env("1");
        set_kernel_plan(prefetch_plan(false));
        EXPECT_TRUE(decode_kv_prefetch());
        EXPECT_TRUE(contains(describe_kernel_plan(), "decode KV prefetch: on (PAGODA_DECODE_PREFETCH, over the profile's off)"))
            << describe_kernel_plan();
    }
    {
        EnvAndPlan env("0");
        set_kernel_plan(prefetch_plan(true));
        EXPECT_FALSE(decode_kv_prefetch());
        clear_kernel_plan();
        EXPECT_TRUE(contains(describe_kernel_plan(), "decode KV prefetch: off (PAGODA_DECODE_PREFETCH)")) << describe_kernel_plan();
    }
}

TEST(KernelPlanDecodePrefetch, ABadValueIsAnError) {
    EnvAndPlan env("yes");
    try {
        (void)decode_kv_prefetch();
        ADD_FAILURE() << "PAGODA_DECODE_PREFETCH=yes accepted";
    } catch (const Error& e) {
        EXPECT_TRUE(contains(e.what(), "PAGODA_DECODE_PREFETCH=yes is not 0 or 1")) << e.what();
    }
    EXPECT_THROW((void)describe_kernel_plan(), Error) << "the start-up log line reports it too";
}

}  // namespace
}  // namespace pagoda::backend::cpu
