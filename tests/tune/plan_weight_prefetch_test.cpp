// The kernel plan's decode weight prefetch (kernel_plan.h, weight_prefetch.h): a plan installs its
// choice, a plan without one and clear_kernel_plan put the default (l2) back, PAGODA_WEIGHT_PREFETCH
// wins over the plan, and a value other than l1 or l2 is an error naming the variable.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "backend/cpu/matmul/weight_prefetch.h"
#include "backend/cpu/plan/kernel_plan.h"
#include "core/error.h"
#include "env_guard.h"

namespace pagoda::backend::cpu {
namespace {

// PAGODA_WEIGHT_PREFETCH set (or unset: no value) for one scope; the plan cleared after.
struct EnvAndPlan {
    test::EnvGuard env;
    explicit EnvAndPlan(std::optional<std::string> value) : env("PAGODA_WEIGHT_PREFETCH", std::move(value)) {}
    ~EnvAndPlan() { clear_kernel_plan(); }
};

KernelPlan prefetch_plan(std::optional<WeightPrefetch> level) {
    KernelPlan p;
    p.weight_prefetch = level;
    return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(KernelPlanWeightPrefetch, APlanInstallsItsChoice) {
    EnvAndPlan env(std::nullopt);
    EXPECT_EQ(weight_prefetch(), WeightPrefetch::l2) << "the default is l2";
    set_kernel_plan(prefetch_plan(WeightPrefetch::l1));
    EXPECT_EQ(weight_prefetch(), WeightPrefetch::l1);
    EXPECT_TRUE(contains(describe_kernel_plan(), "decode weight prefetch: l1 (profile)")) << describe_kernel_plan();
    set_kernel_plan(prefetch_plan(WeightPrefetch::l2));
    EXPECT_EQ(weight_prefetch(), WeightPrefetch::l2);
    EXPECT_TRUE(contains(describe_kernel_plan(), "decode weight prefetch: l2 (profile)")) << describe_kernel_plan();
    set_kernel_plan(prefetch_plan(WeightPrefetch::l1));
    set_kernel_plan(prefetch_plan(std::nullopt));  // not measured: the default
    EXPECT_EQ(weight_prefetch(), WeightPrefetch::l2);
    set_kernel_plan(prefetch_plan(WeightPrefetch::l1));
    clear_kernel_plan();
    EXPECT_EQ(weight_prefetch(), WeightPrefetch::l2);
    EXPECT_TRUE(contains(describe_kernel_plan(), "no profile") && contains(describe_kernel_plan(), "decode weight prefetch: l2"))
        << describe_kernel_plan();
}

TEST(KernelPlanWeightPrefetch, TheEnvironmentWinsOverThePlan) {
    {
        EnvAndPlan env("l1");
        set_kernel_plan(prefetch_plan(WeightPrefetch::l2));
        EXPECT_EQ(weight_prefetch(), WeightPrefetch::l1);
        EXPECT_TRUE(contains(describe_kernel_plan(), "decode weight prefetch: l1 (PAGODA_WEIGHT_PREFETCH, over the profile's l2)"))
            << describe_kernel_plan();
    }
    {
        EnvAndPlan env("l2");
        set_kernel_plan(prefetch_plan(WeightPrefetch::l1));
        EXPECT_EQ(weight_prefetch(), WeightPrefetch::l2);
        clear_kernel_plan();
        EXPECT_TRUE(contains(describe_kernel_plan(), "decode weight prefetch: l2 (PAGODA_WEIGHT_PREFETCH)")) << describe_kernel_plan();
    }
}

TEST(KernelPlanWeightPrefetch, ABadValueIsAnError) {
    EnvAndPlan env("L3");
    try {
        (void)weight_prefetch();
        ADD_FAILURE() << "PAGODA_WEIGHT_PREFETCH=L3 accepted";
    } catch (const Error& e) {
        EXPECT_TRUE(contains(e.what(), "PAGODA_WEIGHT_PREFETCH=L3 is not l1 or l2")) << e.what();
    }
    EXPECT_THROW((void)describe_kernel_plan(), Error) << "the start-up log line reports it too";
}

TEST(KernelPlanWeightPrefetch, NamesRoundTrip) {
    for (WeightPrefetch level : {WeightPrefetch::l1, WeightPrefetch::l2})
        EXPECT_EQ(parse_weight_prefetch(weight_prefetch_name(level)), level);
    EXPECT_FALSE(parse_weight_prefetch("L1").has_value());
    EXPECT_FALSE(parse_weight_prefetch("").has_value());
}

}  // namespace
}  // namespace pagoda::backend::cpu
