// Choosing --max-batched-tokens / --max-seqs from step-time curves: synthetic curves with choices
// worked out by hand (and by an independent script) — exact settings, modelled latency and rate.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tune/linear_curves.h"
#include "tune/scheduler_knobs.h"

namespace pagoda::tune {
namespace {

TEST(SchedulerKnobs, CurvesInterpolateAndExtendTheirEnds) {
    const StepCurves c = test::linear_curves();
    EXPECT_NEAR(c.decode.at(16), 0.025, 1e-12);
    EXPECT_NEAR(c.decode.at(128), 0.137, 1e-12);  // past the last point: the last segment continued
    EXPECT_NEAR(c.prefill.at_zero(), 0.010, 1e-12);
    // A step of 16 decodes and a 16-token chunk: D(16) + P(16) - P0.
    EXPECT_NEAR(modelled_step_seconds(c, 16, 16), 0.025 + 0.0016, 1e-12);
    EXPECT_NEAR(modelled_p99_itl(c, 32, 16), 0.0266, 1e-12);
}

TEST(SchedulerKnobs, OneSequenceAtATimeHasNoPromptChunkBetweenItsTokens) {
    const StepCurves c = test::linear_curves();
    // The step both the model and the timed check use: a decode alone for one seat.
    EXPECT_EQ(worst_gap_step(2048, 1).decodes, 1);
    EXPECT_EQ(worst_gap_step(2048, 1).prompt_tokens, 0);
    EXPECT_EQ(worst_gap_step(8, 2).decodes, 2);
    EXPECT_EQ(worst_gap_step(8, 2).prompt_tokens, 6);
    // Its gaps are single decodes, whatever the budget (the chunks precede its first token)...
    EXPECT_NEAR(modelled_p99_itl(c, 2048, 1), c.decode.at(1), 1e-12);
    EXPECT_NEAR(modelled_p99_itl(c, 2, 1), c.decode.at(1), 1e-12);
    // ...while two sequences see the other's chunk: D(2) + P(6) - P0.
    EXPECT_NEAR(modelled_p99_itl(c, 8, 2), c.decode.at(2) + c.prefill.at(6) - c.prefill.at_zero(), 1e-12);
    // A target only a lone decode meets (D(2) alone is 11 ms): one sequence, the target met (the
    // budgets tie in throughput on these linear curves, so which one is not asserted).
    KnobCandidates cand;
    cand.max_batched_tokens = {2, 8, 64};
    cand.max_seqs = {1, 2};
    const KnobChoice k = choose_scheduler_knobs(c, 0.0105, {100, 100, 0}, cand);
    EXPECT_TRUE(k.target_met);
    EXPECT_EQ(k.max_seqs, 1);
    EXPECT_NEAR(k.p99_itl_s, 0.010, 1e-12);
}

TEST(SchedulerKnobs, LargestBatchWhoseWorstStepMeetsTheTarget) {
    // Throughput grows with S; the worst step 9.9 ms + 0.9 ms S + 0.1 ms M must stay <= 30 ms:
    // S = 16 leaves M <= 56, so M = 32; S = 32 does not fit at any M.
    const KnobChoice k = choose_scheduler_knobs(test::linear_curves(), 0.030, {100, 100, 0});
    EXPECT_EQ(k.max_batched_tokens, 32);
    EXPECT_EQ(k.max_seqs, 16);
    EXPECT_TRUE(k.target_met);
    EXPECT_NEAR(k.p99_itl_s, 0.0266, 1e-12);
    EXPECT_NEAR(k.tokens_per_s, 601.5037593984962, 1e-9);
}

// With a measured tail of 1.5 the worst step must stay <= 20 ms for a 30 ms target:
// 9.9 + 0.9 S + 0.1 M <= 20 leaves S = 8 with M = 16 (S = 16 does not fit), at 1.5 x 17.8 ms.
TEST(SchedulerKnobs, TheMeasuredTailNarrowsWhatMeetsTheTarget) {
    StepCurves c = test::linear_curves();
    c.tail = 1.5;
    EXPECT_NEAR(modelled_p99_itl(c, 32, 16), 1.5 * 0.0266, 1e-12);
    EXPECT_NEAR(modelled_step_seconds(c, 16, 16), 0.0266, 1e-12);  // the best time is unchanged
    const KnobChoice k = choose_scheduler_knobs(c, 0.030, {100, 100, 0});
    EXPECT_EQ(k.max_seqs, 8);
    EXPECT_EQ(k.max_batched_tokens, 16);
    EXPECT_TRUE(k.target_met);
    EXPECT_NEAR(k.p99_itl_s, 1.5 * 0.0178, 1e-12);
}

// A measured setting takes its measurement; every other one the model's value times the correction.
// Target 30 ms: the model alone picks 32 / 16 (26.6 ms). Measured at 40 ms it is out; with the
// model's error (40 / 26.6) on the rest, a modelled step must stay <= 30 / 1.504 = 19.95 ms: 12
// decodes alone take 21 ms, 8 decodes leave M = 16 or 32, equal in throughput (linear prompt cost),
// so the first, 16 (17.8 ms modelled, 26.8 ms corrected).
TEST(SchedulerKnobs, MeasuredSettingsAndTheModelsErrorDecideTheNextChoice) {
    const StepCurves c = test::linear_curves();
    KnobCandidates cand;
    cand.max_batched_tokens = {8, 16, 32, 64};
    cand.max_seqs = {1, 2, 4, 8, 12, 16};
    const KnobChoice first = choose_scheduler_knobs(c, 0.030, {100, 100, 0}, cand);
    ASSERT_EQ(first.max_batched_tokens, 32);
    ASSERT_EQ(first.max_seqs, 16);
    KnobMeasurements m;
    m.p99_itl_s[{32, 16}] = 0.040;
    m.model_correction = 0.040 / 0.0266;
    const KnobChoice next = choose_scheduler_knobs(c, 0.030, {100, 100, 0}, cand, m);
    EXPECT_EQ(next.max_seqs, 8);
    EXPECT_EQ(next.max_batched_tokens, 16);
    EXPECT_TRUE(next.target_met);
    EXPECT_NEAR(next.p99_itl_s, 0.0178 * 0.040 / 0.0266, 1e-12);
    // A measurement under the target is taken as it is, even above the model's value.
    KnobMeasurements ok;
    ok.p99_itl_s[{32, 16}] = 0.029;
    const KnobChoice kept = choose_scheduler_knobs(c, 0.030, {100, 100, 0}, cand, ok);
    EXPECT_EQ(kept.max_batched_tokens, 32);
    EXPECT_EQ(kept.max_seqs, 16);
    EXPECT_NEAR(kept.p99_itl_s, 0.029, 1e-12);
}

TEST(SchedulerKnobs, TailIsThe95thPercentileOverTheBest) {
    std::vector<double> s;
    for (int i = 49; i >= 10; --i) s.push_back(i * 1e-3);  // 40 samples, any order
    EXPECT_NEAR(tail_ratio(s), 47.0 / 10.0, 1e-12);      // nearest rank 38 of 40: the third largest
    EXPECT_EQ(tail_ratio({0.005}), 1.0);
    EXPECT_EQ(tail_ratio({}), 1.0);
    EXPECT_NEAR(tail_ratio({0.002, 0.001}), 2.0, 1e-12);
    EXPECT_EQ(tail_ratio({0.003, 0.003, 0.003}), 1.0);
}

TEST(SchedulerKnobs, ConcurrencyCapsTheUsefulSequences) {
    // Four clients: more than 4 sequences add latency and no throughput; the first best is kept.
    const KnobChoice k = choose_scheduler_knobs(test::linear_curves(), 0.030, {100, 100, 4});
    EXPECT_EQ(k.max_batched_tokens, 8);  // 4 decodes + 4-token chunks: the budget costs no throughput here
    EXPECT_EQ(k.max_seqs, 4);
    EXPECT_NEAR(k.tokens_per_s, 298.5074626865671, 1e-9);
}

TEST(SchedulerKnobs, UnreachableTargetGivesTheLowestLatency) {
    const KnobChoice k = choose_scheduler_knobs(test::linear_curves(), 0.001, {100, 100, 0});
    EXPECT_FALSE(k.target_met);
    EXPECT_EQ(k.max_batched_tokens, 8);
    EXPECT_EQ(k.max_seqs, 1);
    EXPECT_NEAR(k.p99_itl_s, 0.010, 1e-12);  // D(1): a lone sequence's gaps are its decodes alone
}

TEST(SchedulerKnobs, SmallChunksCostMoreSoTheBudgetGrowsWithTheTarget) {
    // Prompt steps cost 0.29 ms a token up to 32 tokens, then 0.1 ms: bigger chunks are cheaper per
    // token, so a looser target buys a larger budget as well as more sequences.
    StepCurves c = test::linear_curves();
    c.prefill.points = {{1, 0.011}, {32, 0.020}, {2048, 0.2216}};
    const KnobChoice k40 = choose_scheduler_knobs(c, 0.040, {100, 100, 0});
    EXPECT_EQ(k40.max_batched_tokens, 64);
    EXPECT_EQ(k40.max_seqs, 16);
    EXPECT_NEAR(k40.p99_itl_s, 0.035890322580645166, 1e-12);
    EXPECT_NEAR(k40.tokens_per_s, 541.9438301443143, 1e-9);
    const KnobChoice k60 = choose_scheduler_knobs(c, 0.060, {300, 50, 0});
    EXPECT_EQ(k60.max_batched_tokens, 128);
    EXPECT_EQ(k60.max_seqs, 32);
    EXPECT_NEAR(k60.tokens_per_s, 422.21246139650174, 1e-9);
}

TEST(SchedulerKnobs, DisturbedPointsAreBoundedByLaterOnes) {
    Curve c;
    c.points = {{1, 0.036}, {2, 0.035}, {4, 0.055}, {8, 0.042}, {16, 0.092}};
    c.make_monotone();
    const std::vector<std::pair<double, double>> want = {{1, 0.035}, {2, 0.035}, {4, 0.042}, {8, 0.042}, {16, 0.092}};
    EXPECT_EQ(c.points, want);
}

TEST(SchedulerKnobs, NoMeasurementsIsAnError) {
    EXPECT_THROW(choose_scheduler_knobs(StepCurves{}, 0.05, {}), Error);
}

}  // namespace
}  // namespace pagoda::tune
