// The hybrid prefix cache against a scripted recurrent model: each state slot holds the tokens it has
// folded in, which must equal the sequence's KV context at every row (so a restore from the wrong
// snapshot, a stale snapshot or a missed copy shows), and the logits are a function of that state
// alone, so the greedy output must be reference_greedy's. Also: chunks end at the snapshot
// positions, snapshot slots are never a running sequence's, eviction drops snapshots, and a failed
// step drops them all. (hybrid_prefix_cache_test.cpp runs the same on random qwen35 models.)
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;

class FakeRecurrentModel : public test::FakeStepModel {
public:
    FakeRecurrentModel(int64_t vocab, int32_t n_blocks, int32_t block_size, int32_t slots)
        : FakeStepModel(vocab, n_blocks, block_size), state_(size_t(slots)), kv_(size_t(n_blocks) * size_t(block_size), -1) {
        info_ = FakeStepModel::info();
        info_.n_state_slots = slots;
    }
    const model::StepModelInfo& info() const override { return info_; }

    std::vector<float> forward(const model::Batch& b) override {
        batches.push_back(b);
        const int64_t bs = info_.block_size;
        for (const auto& c : b.block_copies)
            for (int64_t i = 0; i < bs; ++i) kv_[size_t(c.dst * bs + i)] = kv_[size_t(c.src * bs + i)];
        for (const auto& c : b.state_copies) state_.at(size_t(c.dst)) = state_.at(size_t(c.src));
        if (b.seq_state.size() != b.block_tables.size()) fail("fake recurrent model: {} state slots for {} sequences",
                                                              b.seq_state.size(), b.block_tables.size());
        std::vector<int32_t> next(b.block_tables.size(), -1);
        std::vector<float> out;
        for (int64_t i = 0; i < b.size(); ++i) {
            const auto s = size_t(b.seq_index[size_t(i)]);
            std::vector<int32_t>& state = state_.at(size_t(b.seq_state[s]));
            const int32_t pos = b.positions[size_t(i)];
            if (next[s] < 0 && pos == 0) state.clear();
            if (int32_t(state.size()) != pos)
                fail("fake recurrent model: slot {} holds {} tokens, the row is at position {}", b.seq_state[s],
                     state.size(), pos);
            next[s] = pos + 1;
            state.push_back(b.tokens[size_t(i)]);
            kv_[size_t(b.slots[size_t(i)])] = b.tokens[size_t(i)];
            const auto& table = b.block_tables[s];
            for (int32_t p = 0; p <= pos; ++p)  // the state is the KV context, token for token
                if (kv_[size_t(table[size_t(p / bs)] * bs + p % bs)] != state[size_t(p)])
                    fail("fake recurrent model: slot {} disagrees with the KV at position {}", b.seq_state[s], p);
            if (!b.want_logits[size_t(i)]) continue;
            out.resize(out.size() + size_t(info_.vocab_size));
            test::hashed_logits(state, out.data() + out.size() - size_t(info_.vocab_size), info_.vocab_size);
        }
        if (fail_next) {
            fail_next = false;
            fail("fake recurrent model: a failed step");
        }
        return out;
    }

    std::vector<model::Batch> batches;
    bool fail_next = false;

private:
    model::StepModelInfo info_;
    std::vector<std::vector<int32_t>> state_;
    std::vector<int32_t> kv_;
};

constexpr int64_t kVocab = 64;

std::vector<int32_t> prompt(int64_t n, uint32_t seed, int32_t first = -1) {
    auto p = test::make_prompt(n, seed, kVocab);
    if (first >= 0) p[0] = first;
    return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Runs the waves one after another (a wave's prompts submitted together, run to the end) and
// checks every choice against reference_greedy; returns each request's cached prompt tokens.
std::vector<int64_t> run_waves(EngineCore& core, const std::vector<std::vector<std::vector<int32_t>>>& waves,
                               int64_t max_tokens = 6, int32_t n = 1) {
    Driver driver(core);
    std::vector<std::pair<RequestId, std::vector<int32_t>>> ids;
    for (const auto& wave : waves) {
        for (const auto& p : wave) {
            Request r = test::greedy_request(p, max_tokens);
            r.n = n;
            ids.emplace_back(driver.add(std::move(r)), p);
        }
        driver.run();
    }
    std::vector<int64_t> cached;
    for (const auto& [id, p] : ids) {
        for (int32_t c = 0; c < n; ++c) {
            EXPECT_EQ(driver.results[id].choices[c].error, "");
            EXPECT_EQ(driver.results[id].choices[c].tokens, test::reference_greedy(p, max_tokens, kVocab)) << "request " << id;
        }
        cached.push_back(driver.results[id].usage.cached_prompt_tokens);
    }
    return cached;
}

TEST(RecurrentPrefixCache, ResumesAtSnapshotsOnly) {
    FakeRecurrentModel model(kVocab, 256, 4, 4 + 8);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 4}, .state_snapshots = 8});
    ASSERT_TRUE(core.stats().prefix_caching);
    const auto system = prompt(24, 1);
    const auto a = concat(system, prompt(9, 2, 50)), b = concat(system, prompt(13, 3, 51)), c = concat(system, prompt(17, 4, 52));
    // a; a again (its last whole block); b (the system prompt's blocks are cached without a snapshot:
    // from 0, taking one there); c (after the system prompt); a again.
    EXPECT_EQ(run_waves(core, {{a}, {a}, {b}, {c}, {a}}), (std::vector<int64_t>{0, 32, 0, 24, 32}));
    const EngineStats s = core.stats();
    EXPECT_EQ(s.state_snapshot_restores, 3);
    EXPECT_EQ(s.state_snapshots_taken, 4);
    EXPECT_EQ(s.state_snapshots, 4);
    EXPECT_EQ(s.prefix_hit_tokens, 32 + 24 + 32);
    // Running sequences use slots 0..3 only; chunks end at the snapshot positions (b: 24 and 36).
    bool b_cut_24 = false, b_cut_36 = false;
    for (const auto& batch : model.batches) {
        for (int32_t slot : batch.seq_state) EXPECT_LT(slot, 4);
        for (const auto& copy : batch.state_copies) EXPECT_NE(copy.src >= 4, copy.dst >= 4) << "one end is a snapshot";
        if (batch.size() > 0 && batch.positions.back() == 23 && batch.tokens.back() == b[23]) b_cut_24 = true;
        if (batch.size() > 0 && batch.positions.back() == 35 && batch.tokens.back() == b[35]) b_cut_36 = true;
    }
    EXPECT_TRUE(b_cut_24);
    EXPECT_TRUE(b_cut_36);
}

TEST(RecurrentPrefixCache, ConcurrentPromptsWaitForTheSnapshotWherePromptsPart) {
    FakeRecurrentModel model(kVocab, 256, 4, 4 + 8);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 7, .max_seqs = 4}, .state_snapshots = 8});
    const auto system = prompt(24, 1);
    const std::vector<std::vector<int32_t>> wave = {concat(system, prompt(9, 2, 50)), concat(system, prompt(13, 3, 51)),
                                                    concat(system, prompt(17, 4, 52)), concat(system, prompt(21, 5, 53))};
    EXPECT_EQ(run_waves(core, {wave, wave}), (std::vector<int64_t>{0, 0, 24, 24, 32, 36, 40, 44}));
}

TEST(RecurrentPrefixCache, ForksEvictionsAndOneSnapshotSlot) {
    const auto system = prompt(16, 7);
    std::vector<std::vector<std::vector<int32_t>>> waves;
    for (int round = 0; round < 3; ++round)
        for (uint32_t i = 0; i < 6; ++i) {
            auto t = prompt(5 + 3 * i, 20 + i, int32_t(30 + i));
            waves.push_back({i % 2 ? concat(system, t) : t});
        }
    {  // a pool of 16 blocks: cached blocks are evicted, and their snapshots with them
        FakeRecurrentModel model(kVocab, 16, 4, 4 + 8);
        EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 4}, .state_snapshots = 8});
        const auto cached = run_waves(core, waves);
        EXPECT_GT(core.blocks().stats().evicted_blocks, 0);
        EXPECT_GT(core.stats().state_snapshot_restores, 0);
        EXPECT_GT(cached[6 + 1], 0);  // the second round's first shared prompt resumes somewhere
    }
    {  // one snapshot slot: each new snapshot replaces the last
        FakeRecurrentModel model(kVocab, 256, 4, 4 + 1);
        EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 4}, .state_snapshots = 8});
        EXPECT_EQ(core.scheduler().config().state_snapshots, 1);
        auto repeated = waves;
        repeated.push_back(waves.back());  // the last prompt again: its snapshot is the one kept
        const auto cached = run_waves(core, repeated);
        EXPECT_EQ(core.stats().state_snapshots, 1);
        EXPECT_EQ(core.stats().state_snapshot_restores, 1);
        EXPECT_EQ(cached.back(), int64_t((waves.back()[0].size() - 1) / 4 * 4));
    }
    {  // n = 2: the fork copies a state that was restored from a snapshot
        FakeRecurrentModel model(kVocab, 256, 4, 4 + 8);
        EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 4}, .state_snapshots = 8});
        const auto p = concat(system, prompt(10, 9, 40));
        EXPECT_EQ(run_waves(core, {{p}, {p}}, 6, 2), (std::vector<int64_t>{0, 24}));
    }
    {  // a tight pool and 3 seats: preemption recomputes from a snapshot or from zero
        FakeRecurrentModel model(kVocab, 12, 4, 3 + 8);
        EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 16, .max_seqs = 3}, .state_snapshots = 8});
        std::vector<std::vector<int32_t>> all;
        for (const auto& w : waves) all.push_back(w[0]);
        all.resize(6);
        run_waves(core, {all, all});
        EXPECT_GT(core.stats().preemptions, 0);
    }
}

TEST(RecurrentPrefixCache, AFailedStepDropsEverySnapshot) {
    FakeRecurrentModel model(kVocab, 256, 4, 2 + 4);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 2}, .state_snapshots = 4});
    const auto p = prompt(30, 3);
    run_waves(core, {{p}});
    EXPECT_EQ(core.stats().state_snapshots, 1);
    model.fail_next = true;
    Driver driver(core);
    driver.add(test::greedy_request(prompt(9, 4), 3));
    driver.run();
    EXPECT_NE(driver.results.begin()->second.choices[0].error, "");
    EXPECT_EQ(core.stats().state_snapshots, 0);
    // The same prompt again computes from zero, and right.
    EXPECT_EQ(run_waves(core, {{p}}), (std::vector<int64_t>{0}));
}

TEST(RecurrentPrefixCache, NoSnapshotSlotsMeansNoCache) {
    FakeRecurrentModel model(kVocab, 256, 4, 4);
    EngineCore core(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 4}, .state_snapshots = 8});
    EXPECT_FALSE(core.stats().prefix_caching);
    const auto p = prompt(30, 3);
    EXPECT_EQ(run_waves(core, {{p}, {p}}), (std::vector<int64_t>{0, 0}));
    EngineCore off(model, nullptr, {.scheduler = {.max_batched_tokens = 512, .max_seqs = 2}, .prefix_caching = false});
    EXPECT_FALSE(off.stats().prefix_caching);
    EXPECT_EQ(off.scheduler().config().state_snapshots, 0);
}

}  // namespace
}  // namespace pagoda::engine
