// The threaded Engine: concurrent submitters, queue and callback delivery, cancel, shutdown.
#include "engine/engine.h"

#include <atomic>
#include <gtest/gtest.h>
#include <optional>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"

namespace pagoda::engine {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kVocab = 40;

std::vector<int32_t> drain(RequestHandle& h, std::optional<FinishReason>* finish = nullptr) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 100000 && !h.finished(); ++i) {
        auto d = h.next(1000ms);
        if (!d) continue;
        tokens.insert(tokens.end(), d->token_ids.begin(), d->token_ids.end());
        if (d->finish_reason && finish) *finish = d->finish_reason;
    }
    return tokens;
}

TEST(Engine, ConcurrentSubmittersGetReferenceOutputs) {
    auto model = std::make_unique<test::FakeStepModel>(kVocab, 24, 4);
    Engine engine(std::move(model), nullptr, {.scheduler = {.max_batched_tokens = 12, .max_seqs = 6}});
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 6; ++i) {
                auto prompt = test::make_prompt(2 + (t * 7 + i) % 11, uint32_t(t * 100 + i), kVocab);
                auto h = engine.submit(test::greedy_request(prompt, 5 + i));
                if (drain(h) != test::reference_greedy(prompt, 5 + i, kVocab)) ++wrong;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
    engine.shutdown(true);  // the stats snapshot is refreshed after the step that sent the last delta
    auto s = engine.stats();
    EXPECT_EQ(s.requests_finished, 24);
    EXPECT_EQ(s.running_requests + s.waiting_requests, 0);
}

TEST(Engine, ALongStepShowsAsRunningAndShutdownInterruptsIt) {
    auto model = std::make_unique<test::FakeStepModel>(kVocab, 64, 4, 64);
    model->step_delay = std::chrono::milliseconds(20000);  // one very long prefill
    Engine engine(std::move(model), nullptr, {});
    std::mutex m;
    std::optional<FinishReason> finish;
    engine.submit(test::greedy_request({1, 2, 3}, 4), [&](const Delta& d) {
        std::lock_guard lock(m);
        if (d.request_done) finish = d.finish_reason;
    });
    // The gauges reflect the step in flight, not the state before it.
    int64_t running = 0;
    for (int i = 0; i < 400 && running == 0; ++i) {
        running = engine.stats().running_requests;
        std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(running, 1) << "a request inside a long step counts as running";
    EXPECT_EQ(engine.stats().waiting_requests, 0);
    const auto t0 = std::chrono::steady_clock::now();
    engine.shutdown(false);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 2.0) << "shutdown stops the step in flight instead of waiting it out";
    std::lock_guard lock(m);
    EXPECT_EQ(finish, FinishReason::cancelled);
}

TEST(Engine, CallbackDeliveryCancelAndRejection) {
    auto model = std::make_unique<test::FakeStepModel>(kVocab, 64, 4, 64);
    model->step_delay = std::chrono::milliseconds(2);
    Engine engine(std::move(model), nullptr, {});
    std::mutex m;
    std::condition_variable cv;
    std::vector<Delta> got;
    auto h = engine.submit(test::greedy_request({1, 2, 3}, 4), [&](const Delta& d) {
        std::lock_guard lock(m);
        got.push_back(d);
        cv.notify_all();
    });
    {
        std::unique_lock lock(m);
        ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return !got.empty() && got.back().request_done; }));
    }
    EXPECT_EQ(got.size(), 4u);
    EXPECT_EQ(got.back().finish_reason, FinishReason::length);
    EXPECT_GE(got.back().timings.e2e, got.back().timings.ttft);
    EXPECT_EQ(got.back().timings.inter_token.size(), 3u);

    EXPECT_THROW(engine.submit(test::greedy_request(test::make_prompt(64, 1, kVocab), 4)), Error);
    EXPECT_EQ(engine.stats().requests_rejected, 1);

    // A long request cancelled while it runs ends with `cancelled` and frees its blocks.
    auto long_req = engine.submit(test::greedy_request({5, 6}, 60));
    ASSERT_TRUE(long_req.next(10s).has_value());
    engine.cancel(long_req.id());
    std::optional<FinishReason> finish;
    drain(long_req, &finish);
    EXPECT_EQ(finish, FinishReason::cancelled);
}

TEST(Engine, ShutdownDrainsOrCancels) {
    {
        Engine engine(std::make_unique<test::FakeStepModel>(kVocab, 64, 4), nullptr, {});
        std::vector<RequestHandle> hs;
        for (int i = 0; i < 5; ++i) hs.push_back(engine.submit(test::greedy_request({1, int32_t(i)}, 8)));
        engine.shutdown(/*drain=*/true);
        for (auto& h : hs) {
            std::optional<FinishReason> finish;
            EXPECT_EQ(drain(h, &finish).size(), 8u);
            EXPECT_EQ(finish, FinishReason::length);
        }
        EXPECT_THROW(engine.submit(test::greedy_request({1}, 2)), Error);
    }
    {
        Engine engine(std::make_unique<test::FakeStepModel>(kVocab, 64, 4), nullptr, {});
        auto h = engine.submit(test::greedy_request({1, 2}, 100000 / 2));
        engine.shutdown(/*drain=*/false);
        std::optional<FinishReason> finish;
        drain(h, &finish);
        EXPECT_TRUE(h.finished());
        EXPECT_TRUE(finish == FinishReason::cancelled || finish == FinishReason::length);
    }
}

}  // namespace
}  // namespace pagoda::engine
