// Start deadlines on the engine's clock (each fake step costs 10 ms of it, whatever the machine's
// load): a request still waiting at its deadline is never run and ends with deadline_exceeded;
// one that starts in time runs whole; and the start rate the engine measures predicts the wait of
// a request arriving behind a queue within a factor of two (what Retry-After is made of).
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "engine/start_rate.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;
using test::greedy_request;
using test::make_prompt;

constexpr int64_t kVocab = 64;
constexpr auto kStep = std::chrono::milliseconds(10);

Request with_deadline(Request r, std::chrono::milliseconds from_now) {
    r.start_deadline = Clock::now() + from_now;
    return r;
}

TEST(StartDeadline, AQueuedRequestPastItsDeadlineIsAnsweredAndNeverRun) {
    FakeStepModel model(kVocab, 256, 4);
    model.step_cost = kStep;
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 2}});
    Driver driver(core);
    for (uint32_t i = 0; i < 12; ++i) {
        Request r = greedy_request(make_prompt(6, i, kVocab), 10);
        r.stop.ignore_eos = true;
        driver.add(std::move(r));
    }
    // Twelve requests of ten steps ahead on two seats: about 60 steps (600 ms) before a seat frees
    // for the next one. 100 ms is too short; 10 s is plenty.
    const std::vector<int32_t> late_prompt = {63, 62, 61, 60, 59};
    Request late = greedy_request(late_prompt, 4);
    const RequestId late_id = driver.add(with_deadline(late, std::chrono::milliseconds(100)));
    Request patient = greedy_request({1, 2, 3}, 4);
    patient.stop.ignore_eos = true;
    const RequestId patient_id = driver.add(with_deadline(patient, std::chrono::seconds(10)));
    driver.run();

    const auto& l = driver.results[late_id];
    ASSERT_TRUE(l.done);
    EXPECT_EQ(l.choices.at(0).finish, FinishReason::error);
    EXPECT_EQ(l.choices.at(0).error_code, "deadline_exceeded");
    EXPECT_NE(l.choices.at(0).error.find("start deadline"), std::string::npos) << l.choices.at(0).error;
    EXPECT_TRUE(l.choices.at(0).tokens.empty());
    EXPECT_EQ(l.usage.completion_tokens, 0);
    for (const auto& context : model.contexts)  // never run: the model never saw its prompt
        EXPECT_FALSE(context.size() >= late_prompt.size() &&
                     std::equal(late_prompt.begin(), late_prompt.end(), context.begin()));
    const auto& p = driver.results[patient_id];
    ASSERT_TRUE(p.done);
    EXPECT_EQ(p.choices.at(0).finish, FinishReason::length);
    EXPECT_EQ(p.choices.at(0).tokens.size(), 4u);
    EXPECT_EQ(core.stats().requests_expired, 1);
    EXPECT_EQ(core.stats().requests_failed, 0);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
}

// The expected wait (waiting requests / measured start rate) against the wait a request behind
// them actually has, for several queue lengths and request lengths.
TEST(StartDeadline, TheMeasuredStartRatePredictsTheWaitWithinAFactorOfTwo) {
    for (int64_t max_tokens : {4, 12, 30}) {
        for (int queued : {6, 20}) {
            FakeStepModel model(kVocab, 1024, 4);
            model.step_cost = kStep;
            EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 3}});
            Driver driver(core);
            auto request = [&](uint32_t i) {
                Request r = greedy_request(make_prompt(5 + i % 4, i, kVocab), max_tokens);
                r.stop.ignore_eos = true;
                return r;
            };
            uint32_t next = 0;
            // A steady backlog long enough for the rate to be measured.
            for (; next < 12; ++next) driver.add(request(next));
            for (int s = 0; s < 3 * max_tokens; ++s) core.step(), driver.collect();
            while (core.stats().waiting_requests < queued) driver.add(request(next++));
            const EngineStats st = core.stats();
            ASSERT_GT(st.start_rate, 0) << "no start rate measured";
            const double expected = double(st.waiting_requests) / st.start_rate;
            const RequestId probe = driver.add(request(next++));
            driver.run();
            const double actual = driver.results[probe].timings.queue;
            EXPECT_GT(actual, 0);
            EXPECT_LE(expected, 2 * actual) << "max_tokens " << max_tokens << ", " << queued << " queued";
            EXPECT_GE(expected, actual / 2) << "max_tokens " << max_tokens << ", " << queued << " queued";
        }
    }
}

TEST(StartRate, CountsOnlyBackloggedStepsAndDecays) {
    StartRate rate(10.0);
    EXPECT_FALSE(rate.rate().has_value());
    EXPECT_EQ(rate.expected_wait(0), 0.0);
    EXPECT_FALSE(rate.expected_wait(3).has_value());
    rate.observe(1.0, 5, /*backlogged=*/false);  // an idle queue says nothing
    EXPECT_FALSE(rate.rate().has_value());
    for (int i = 0; i < 10; ++i) rate.observe(0.1, 1, true);  // 10 starts a second
    EXPECT_NEAR(*rate.rate(), 10.0, 1e-9);
    EXPECT_NEAR(*rate.expected_wait(5), 0.5, 1e-9);
    for (int i = 0; i < 600; ++i) rate.observe(0.1, i % 2, true);  // then 5 a second for a minute
    EXPECT_NEAR(*rate.rate(), 5.0, 0.2);
}

}  // namespace
}  // namespace pagoda::engine

// Retry-After for a refusal because of the queue: when `ahead` more requests should have started.
namespace pagoda::engine {
TEST(StartRate, RetryAfterIsTheQueuesExpectedDrainInWholeSeconds) {
    EXPECT_EQ(retry_after_seconds(10, 4.0), 3);    // 2.5 s, rounded up
    EXPECT_EQ(retry_after_seconds(8, 4.0), 2);     // exactly 2 s
    EXPECT_EQ(retry_after_seconds(1, 100.0), 1);   // never below one second
    EXPECT_EQ(retry_after_seconds(10, 0.0), 1);    // rate unknown
    EXPECT_EQ(retry_after_seconds(0, 4.0), 1);     // nothing ahead
    EXPECT_EQ(retry_after_seconds(-3, 4.0), 1);
    EXPECT_EQ(retry_after_seconds(1000000, 0.5), 3600);  // capped at an hour
}
}  // namespace pagoda::engine
