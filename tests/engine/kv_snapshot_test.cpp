// Engine::kv_snapshot: taken by the engine thread on request (also when idle), it shows the
// sequences of a running request holding blocks, and after a cancel every block back to free or
// cached with no sequences.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <thread>

#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"

namespace pagoda::engine {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kVocab = 40;

TEST(KvSnapshot, CoreSnapshotListsSequencesAndTheirBlocks) {
    test::FakeStepModel model(kVocab, 16, 4);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 4}});
    test::Driver driver(core);
    const RequestId a = driver.add(test::greedy_request(test::make_prompt(9, 1, kVocab), 20));
    core.step();  // prefill: 9 tokens in 3 blocks, plus the sampled token
    const KvSnapshot k = core.kv_snapshot();
    ASSERT_EQ(k.sequences.size(), 1u);
    const SequenceView& s = k.sequences[0];
    EXPECT_EQ(s.request, a);
    EXPECT_EQ(s.status, SeqStatus::running);
    EXPECT_EQ(s.tokens, 10);
    EXPECT_EQ(s.computed, 9);
    EXPECT_EQ(s.blocks, int32_t(core.blocks().block_table(s.seq).size()));
    EXPECT_EQ(k.blocks.n_used, s.blocks);
    for (int32_t b : core.blocks().block_table(s.seq)) EXPECT_EQ(k.blocks.owner[size_t(b)], s.seq);
    EXPECT_EQ(k.step, 1);
    EXPECT_NE(k.taken, Clock::time_point{});
}

TEST(KvSnapshot, EngineTakesOneOnRequestAndShowsTheFreedPoolAfterCancel) {
    auto owned = std::make_unique<test::FakeStepModel>(kVocab, 32, 4);
    test::FakeStepModel* model = owned.get();
    model->step_delay = 2ms;
    Engine engine(std::move(owned), nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 4}});

    // Idle engine, nothing taken yet: the request wakes the engine thread.
    KvSnapshot idle = engine.kv_snapshot();
    EXPECT_NE(idle.taken, Clock::time_point{});
    EXPECT_EQ(idle.blocks.n_blocks(), 32);
    EXPECT_EQ(idle.blocks.n_free, 32);
    EXPECT_TRUE(idle.sequences.empty());

    auto h = engine.submit(test::greedy_request(test::make_prompt(10, 3, kVocab), 100));
    KvSnapshot busy;
    for (int i = 0; i < 500; ++i) {  // until the request has been admitted and holds blocks
        busy = engine.kv_snapshot(0ms);
        if (busy.blocks.n_used > 0) break;
        std::this_thread::sleep_for(2ms);
    }
    ASSERT_GT(busy.blocks.n_used, 0);
    ASSERT_EQ(busy.sequences.size(), 1u);
    EXPECT_EQ(busy.sequences[0].request, h.id());
    EXPECT_EQ(busy.sequences[0].blocks, busy.blocks.n_used);

    engine.cancel(h.id());
    while (!h.finished()) h.next(1000ms);
    KvSnapshot after;
    for (int i = 0; i < 500; ++i) {
        after = engine.kv_snapshot(0ms);
        if (after.sequences.empty()) break;
        std::this_thread::sleep_for(2ms);
    }
    EXPECT_TRUE(after.sequences.empty());
    EXPECT_EQ(after.blocks.n_used, 0);
    EXPECT_EQ(after.blocks.n_free + after.blocks.n_cached, 32);

    // A fresh enough snapshot is returned as it is, without asking the engine thread.
    const KvSnapshot cached = engine.kv_snapshot(10s);
    EXPECT_EQ(cached.taken, after.taken);
    engine.shutdown();
    // After shutdown the last snapshot comes back at once.
    const auto t0 = Clock::now();
    engine.kv_snapshot(0ms, 5000ms);
    EXPECT_LT(Clock::now() - t0, 1s);
}

}  // namespace
}  // namespace pagoda::engine
