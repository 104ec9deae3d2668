// `pagoda tune` measures the decode KV prefetch on whole decode steps of the model (tuner.cpp, 3b):
// two contexts (a long one, capped by the model's, and the workload's) times two batch sizes, each
// with and without; the profile's choice is choose_decode_prefetch of the recorded timings, and
// the steps after it run with it. PAGODA_DECODE_PREFETCH pins it: then nothing is measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/attention/attention.h"
#include "backend/cpu/matmul_test_util.h"
#include "env_guard.h"
#include "tiny_q8_model.h"
#include "tune/decode_prefetch_choice.h"
#include "tune/profile.h"
#include "tune/tuner.h"

namespace pagoda::tune {
namespace {

TEST(TuneDecodePrefetch, MeasuredOnWholeDecodeStepsAndChosenByTheRule) {
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    pagoda::test::EnvGuard env("PAGODA_DECODE_PREFETCH", std::nullopt);
    const TuneOptions o = test::quick_tiny_options();
    std::vector<std::string> progress;
    size_t steps = 0, total_steps = 0;  // steps reported before "done", and the total they count towards
    const Profile p = tune_model(o, [&](size_t done, size_t total, const std::string& what) {
        EXPECT_LE(done, total) << what;
        progress.push_back(what);
        if (what != "done") steps = std::max(steps, done + 1);
        total_steps = total;
    });
    EXPECT_LE(steps, total_steps) << "the progress total counts the new steps";
    const auto& m = p.measurements.at("decode_kv_prefetch");
    const auto& cases = m.at("cases");
    ASSERT_EQ(cases.size(), 4u) << m.dump();
    std::vector<DecodePrefetchTiming> timings;
    int long_cases = 0;
    for (const auto& c : cases) {
        EXPECT_GT(c.at("off_seconds").get<double>(), 0.0);
        EXPECT_GT(c.at("on_seconds").get<double>(), 0.0);
        EXPECT_LE(c.at("context").get<int64_t>(), 256) << "capped by the model's context";
        long_cases += c.at("long_context").get<bool>();
        timings.push_back({c.at("case"), c.at("long_context"), c.at("off_seconds"), c.at("on_seconds")});
        EXPECT_NE(std::find(progress.begin(), progress.end(),
                            "decode KV prefetch, " + c.at("case").get<std::string>() + ": off against on"),
                  progress.end());
    }
    EXPECT_EQ(long_cases, 2);
    ASSERT_TRUE(p.plan.decode_kv_prefetch.has_value());
    EXPECT_EQ(*p.plan.decode_kv_prefetch, choose_decode_prefetch(timings).on);
    EXPECT_EQ(m.at("chosen"), *p.plan.decode_kv_prefetch);
    EXPECT_EQ(profile_to_json(p).at("decode_kv_prefetch"), *p.plan.decode_kv_prefetch);
    EXPECT_EQ(backend::cpu::decode_kv_prefetch(), *p.plan.decode_kv_prefetch) << "installed for the steps after it";
}

TEST(TuneDecodePrefetch, NotMeasuredWhereTheEnvironmentPinsIt) {
    backend::cpu::testing::KernelConfigGuard config;
    test::PlanCleared clear;
    pagoda::test::EnvGuard env("PAGODA_DECODE_PREFETCH", "1");
    std::vector<std::string> progress;
    const Profile p =
        tune_model(test::quick_tiny_options(), [&](size_t, size_t, const std::string& what) { progress.push_back(what); });
    EXPECT_FALSE(p.plan.decode_kv_prefetch.has_value());
    EXPECT_FALSE(profile_to_json(p).contains("decode_kv_prefetch"));
    EXPECT_EQ(p.measurements.at("decode_kv_prefetch").at("measured"), false);
    EXPECT_NE(std::find(progress.begin(), progress.end(), "decode KV prefetch: not measured (PAGODA_DECODE_PREFETCH pins it)"),
              progress.end());
    EXPECT_TRUE(backend::cpu::decode_kv_prefetch());
}

}  // namespace
}  // namespace pagoda::tune
