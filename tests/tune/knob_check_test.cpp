// `pagoda tune`'s check of its scheduler choice, with a stand-in for the served run: the served
// p99 is a chosen multiple of the model's value per setting, so every round's choice is known.
// Curves from linear_curves.h: the modelled worst step of M / S is 9 + 0.9 S + 0.1 M ms.
#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "tune/knob_check.h"
#include "tune/linear_curves.h"

namespace pagoda::tune {
namespace {

struct CheckRun {
    KnobChoice choice;
    nlohmann::json record;
    std::vector<std::pair<int64_t, int32_t>> served;  // each served setting, once per run
};

// Serves every setting at factor(M, S) x the model's p99; a 30 ms target.
CheckRun check(const std::function<double(int64_t, int32_t)>& factor) {
    const StepCurves curves = test::linear_curves();
    CheckRun run;
    TuneOptions o;
    o.target_itl_ms = 30;
    o.workload = {100, 100, 0};
    o.serve_check = [&](const ServingCheck& c) {
        run.served.push_back({c.max_batched_tokens, c.max_seqs});
        const double p99 = factor(c.max_batched_tokens, c.max_seqs) * modelled_p99_itl(curves, c.max_batched_tokens, c.max_seqs);
        return ServedFigures{p99, 100.0, 1000};
    };
    KnobCheckSetup setup{o, curves, {}};
    setup.open = [](int, int64_t, int64_t, int32_t) -> std::unique_ptr<model::StepModel> {
        ADD_FAILURE() << "a served check opened a model to time";
        return nullptr;
    };
    setup.progress_step = [](const std::string&) {};
    run.choice = choose_and_check_knobs(setup, run.record);
    // Each setting is served twice in a row (the mean of two runs counts): keep one of each pair.
    std::vector<std::pair<int64_t, int32_t>> once;
    for (size_t i = 0; i < run.served.size(); i += 2) {
        EXPECT_EQ(run.served[i], run.served[i + 1]);
        once.push_back(run.served[i]);
    }
    run.served = once;
    return run;
}

using Setting = std::pair<int64_t, int32_t>;

TEST(KnobCheck, APassNearTheTargetEndsTheSearch) {
    // Served exactly as modelled: 32 / 16 at 26.6 ms, over 3/4 of 30 ms: nothing more is tried.
    const CheckRun r = check([](int64_t, int32_t) { return 1.0; });
    EXPECT_EQ(r.served, (std::vector<Setting>{{32, 16}}));
    EXPECT_EQ(r.choice.max_batched_tokens, 32);
    EXPECT_EQ(r.choice.max_seqs, 16);
    EXPECT_NEAR(r.choice.p99_itl_s, 0.0266, 1e-12);
    EXPECT_TRUE(r.choice.target_met);
}

TEST(KnobCheck, APassWithRoomLooksFurtherUpWithTheModelScaledDown) {
    // Served at half the model: 32 / 16 at 13.3 ms leaves room. Scaled by 0.5, a modelled step may
    // take 60 ms: S = 64 needs 67.6 ms, S = 32 fits with M = 64 (44.2 ms modelled, 22.1 served),
    // which passes with less than a quarter to spare, so the search ends there.
    const CheckRun r = check([](int64_t, int32_t) { return 0.5; });
    EXPECT_EQ(r.served, (std::vector<Setting>{{32, 16}, {64, 32}}));
    EXPECT_EQ(r.choice.max_batched_tokens, 64);
    EXPECT_EQ(r.choice.max_seqs, 32);
    EXPECT_NEAR(r.choice.p99_itl_s, 0.0221, 1e-12);
    EXPECT_TRUE(r.choice.target_met);
    ASSERT_EQ(r.record["rounds"].size(), 2u);
    EXPECT_TRUE(r.record["rounds"][0]["passed"].get<bool>());
    EXPECT_TRUE(r.record["rounds"][1]["passed"].get<bool>());
    EXPECT_NEAR(r.record["model_correction"].get<double>(), 0.5, 1e-12);
}

TEST(KnobCheck, AStepUpThatMissesLeavesTheSettingThatPassed) {
    // Half the model up to 16 sequences, twice it beyond: the step up to 64 / 32 is served at
    // 88.4 ms, so 32 / 16 (13.3 ms) stands.
    const CheckRun r = check([](int64_t, int32_t s) { return s <= 16 ? 0.5 : 2.0; });
    EXPECT_EQ(r.served, (std::vector<Setting>{{32, 16}, {64, 32}}));
    EXPECT_EQ(r.choice.max_batched_tokens, 32);
    EXPECT_EQ(r.choice.max_seqs, 16);
    EXPECT_NEAR(r.choice.p99_itl_s, 0.0133, 1e-12);
    EXPECT_TRUE(r.choice.target_met);
    EXPECT_FALSE(r.record["rounds"][1]["passed"].get<bool>());
}

TEST(KnobCheck, AMissFirstThenThePassUnderTheCorrectedModel) {
    // Served at 1.5 x the model everywhere: 32 / 16 misses (39.9 ms); corrected by 1.5 a modelled
    // step must stay <= 20 ms: 8 decodes with M = 16 (17.8 ms, served 26.7). Its ratio is the same
    // 1.5, so nothing faster is predicted to pass (and 26.7 ms leaves no room anyway).
    const CheckRun r = check([](int64_t, int32_t) { return 1.5; });
    EXPECT_EQ(r.served, (std::vector<Setting>{{32, 16}, {16, 8}}));
    EXPECT_EQ(r.choice.max_batched_tokens, 16);
    EXPECT_EQ(r.choice.max_seqs, 8);
    EXPECT_NEAR(r.choice.p99_itl_s, 1.5 * 0.0178, 1e-12);
    EXPECT_TRUE(r.choice.target_met);
}

}  // namespace
}  // namespace pagoda::tune
