// `pagoda tune` measures the decode weight prefetch on whole decode steps of the model (tuner.cpp,
// 3c): two batch sizes at the workload's context, each with l1 and with l2; the profile's choice is
// choose_weight_prefetch of the recorded timings, and the steps after it run with it.
// PAGODA_WEIGHT_PREFETCH pins it: then nothing is measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/matmul/weight_prefetch.h"
#include "backend/cpu/matmul_test_util.h"
#include "env_guard.h"
#include "tiny_q8_model.h"
#include "tune/profile.h"
#include "tune/tuner.h"
#include "tune/weight_prefetch_choice.h"

namespace pagoda::tune {
namespace {

TEST(TuneWeightPrefetch, MeasuredOnWholeDecodeStepsAndChosenByTheRule) {
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    pagoda::test::EnvGuard env("PAGODA_WEIGHT_PREFETCH", std::nullopt);
    std::vector<std::string> progress;
    size_t steps = 0, total_steps = 0;
    const Profile p = tune_model(test::quick_tiny_options(), [&](size_t done, size_t total, const std::string& what) {
        EXPECT_LE(done, total) << what;
        progress.push_back(what);
        if (what != "done") steps = std::max(steps, done + 1);
        total_steps = total;
    });
    EXPECT_LE(steps, total_steps) << "the progress total counts the new steps";
    const auto& m = p.measurements.at("weight_prefetch");
    const auto& cases = m.at("cases");
    ASSERT_EQ(cases.size(), 2u) << m.dump();
    std::vector<WeightPrefetchTiming> timings;
    for (const auto& c : cases) {
        EXPECT_GT(c.at("l1_seconds").get<double>(), 0.0);
        EXPECT_GT(c.at("l2_seconds").get<double>(), 0.0);
        timings.push_back({c.at("case"), c.at("l1_seconds"), c.at("l2_seconds")});
        EXPECT_NE(std::find(progress.begin(), progress.end(),
                            "decode weight prefetch, " + c.at("case").get<std::string>() + ": l1 against l2"),
                  progress.end());
    }
    ASSERT_TRUE(p.plan.weight_prefetch.has_value());
    const auto level = choose_weight_prefetch(timings).level;
    EXPECT_EQ(*p.plan.weight_prefetch, level);
    EXPECT_EQ(m.at("chosen"), backend::cpu::weight_prefetch_name(level));
    EXPECT_EQ(profile_to_json(p).at("weight_prefetch"), backend::cpu::weight_prefetch_name(level));
    EXPECT_EQ(backend::cpu::weight_prefetch(), level) << "installed for the steps after it";
}

TEST(TuneWeightPrefetch, NotMeasuredWhereTheEnvironmentPinsIt) {
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    pagoda::test::EnvGuard env("PAGODA_WEIGHT_PREFETCH", "l1");
    std::vector<std::string> progress;
    const Profile p =
        tune_model(test::quick_tiny_options(), [&](size_t, size_t, const std::string& what) { progress.push_back(what); });
    EXPECT_FALSE(p.plan.weight_prefetch.has_value());
    EXPECT_FALSE(profile_to_json(p).contains("weight_prefetch"));
    EXPECT_EQ(p.measurements.at("weight_prefetch").at("measured"), false);
    EXPECT_NE(std::find(progress.begin(), progress.end(), "decode weight prefetch: not measured (PAGODA_WEIGHT_PREFETCH pins it)"),
              progress.end());
    EXPECT_EQ(backend::cpu::weight_prefetch(), backend::cpu::WeightPrefetch::l1);
}

}  // namespace
}  // namespace pagoda::tune
