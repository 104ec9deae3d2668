// The prefix cache of a hybrid model (qwen35 / qwen35moe: gated DeltaNet layers whose recurrent
// state lives in slots beside the paged KV). A prompt resumes from cached blocks only where a state
// snapshot was taken (engine/state_snapshots.h), so with the cache on the greedy tokens must be
// bitwise those with it off for repeated, partially shared, concurrent and forked prompts, on the CPU
// (its delta rule token by token: hybrid_test_model.h, RecurrentDeltaRule) and the reference backend, under a KV pool small enough to evict and with one snapshot slot; and
// the usage's cached-token counts show exactly where the snapshots let a prompt resume.
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/hybrid_test_model.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;

std::string hybrid_model(const std::string& arch) { return test::hybrid_test_model(arch, 29, "engine-hybrid-prefix"); }

struct Scenario {
    bool cache = true;
    int32_t snapshots = 8;
    int64_t kv_tokens = 1024;
    int64_t budget = 512;
    int32_t max_seqs = 4;
    int32_t n = 1;  // choices per request
};

struct Outcome {
    std::vector<std::vector<std::vector<int32_t>>> tokens;  // per request, per choice
    std::vector<int64_t> cached;                            // per request: usage.cached_prompt_tokens
    EngineStats stats;
    int64_t evicted_blocks = 0;
};

constexpr int32_t kBlock = 4;

// Runs the waves one after another: a wave's prompts are submitted together and run to the end.
Outcome run(const std::string& path, const std::string& backend, const Scenario& s,
            const std::vector<std::vector<std::vector<int32_t>>>& waves, int64_t max_tokens = 8) {
    auto step = model::open_step_model(path, {.backend = backend, .threads = 2, .kv = {.block_size = kBlock},
                                              .tokens_wanted = s.kv_tokens, .max_step_tokens = s.budget,
                                              .state_slots = s.max_seqs + s.snapshots});
    EngineCore core(*step, nullptr,
                    {.scheduler = {.max_batched_tokens = s.budget, .max_seqs = s.max_seqs}, .prefix_caching = s.cache,
                     .state_snapshots = s.snapshots});
    Driver driver(core);
    std::vector<RequestId> ids;
    for (const auto& wave : waves) {
        for (const auto& prompt : wave) {
            Request r = test::greedy_request(prompt, max_tokens);
            r.n = s.n;
            ids.push_back(driver.add(std::move(r)));
        }
        driver.run();
    }
    Outcome out;
    for (RequestId id : ids) {
        out.tokens.emplace_back();
        for (int32_t c = 0; c < s.n; ++c) {
            EXPECT_EQ(driver.results[id].choices[c].error, "");
            out.tokens.back().push_back(driver.results[id].choices[c].tokens);
        }
        out.cached.push_back(driver.results[id].usage.cached_prompt_tokens);
    }
    out.stats = core.stats();
    out.evicted_blocks = core.blocks().stats().evicted_blocks;
    return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

struct Case {
    std::string arch, backend;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << " on " << c.backend; }

class HybridPrefixCache : public ::testing::TestWithParam<Case> {};

TEST_P(HybridPrefixCache, GreedyTokensEqualCacheOffAndHitsResumeAtSnapshots) {
    const test::RecurrentDeltaRule recurrent;
    const auto [arch, backend] = GetParam();
    const std::string path = hybrid_model(arch);
    const auto system = test::make_prompt(24, 7, 300);  // 6 whole blocks
    std::vector<std::vector<int32_t>> tails;
    for (uint32_t i = 0; i < 4; ++i) {
        auto t = test::make_prompt(9 + 4 * i, 40 + i, 300);
        t[0] = int32_t(200 + i);  // the prompts part right after the system prompt
        tails.push_back(t);
    }
    const auto a = concat(system, tails[0]);  // 33 tokens: 8 reusable blocks
    const auto b = concat(system, tails[1]);
    const auto c = concat(system, tails[2]);
    // Repeated, then partially shared one at a time, then repeated again.
    const std::vector<std::vector<std::vector<int32_t>>> waves = {{a}, {a}, {b}, {c}, {a}};
    const Outcome off = run(path, backend, {.cache = false}, waves);
    const Outcome on = run(path, backend, {}, waves);
    EXPECT_FALSE(off.stats.prefix_caching);
    EXPECT_TRUE(on.stats.prefix_caching);
    ASSERT_EQ(on.tokens, off.tokens);
    // a: nothing cached; a again: its 8 whole blocks; b: the system prompt's blocks are cached but no
    // snapshot ends there yet, so it computes everything and takes one; c resumes after the system
    // prompt; a resumes at its own last whole block again.
    EXPECT_EQ(on.cached, (std::vector<int64_t>{0, 32, 0, 24, 32}));
    EXPECT_EQ(off.cached, (std::vector<int64_t>{0, 0, 0, 0, 0}));
    EXPECT_EQ(on.stats.state_snapshot_restores, 3);
    EXPECT_EQ(on.stats.state_snapshot_slots, 8);
    EXPECT_GE(on.stats.state_snapshots_taken, 4);  // a's, b's part point and its end, c's end
    EXPECT_EQ(on.stats.prefix_hit_tokens, 32 + 24 + 32);
    EXPECT_LT(on.stats.computed_prompt_tokens, off.stats.computed_prompt_tokens);

    // Concurrent prompts sharing the system prompt under a small token budget (chunks end at the
    // snapshot positions and at the budget), then the same again: every one resumes somewhere.
    const std::vector<std::vector<int32_t>> wave = {a, b, c, concat(system, tails[3])};
    const Scenario chunked{.budget = 7, .max_seqs = 4};
    const Outcome off2 = run(path, backend, {.cache = false, .budget = 7}, {wave, wave});
    const Outcome on2 = run(path, backend, chunked, {wave, wave});
    ASSERT_EQ(on2.tokens, off2.tokens);
    // The first wave: b is admitted once a is past the system prompt (no snapshot there), so it
    // computes everything; c and d wait for b to snapshot where they part from it and resume there.
    // The second wave: each resumes at its own last whole block.
    EXPECT_EQ(on2.cached, (std::vector<int64_t>{0, 0, 24, 24, 32, 36, 40, 44}));

    // n = 2: the choices fork after a prompt resumed from a snapshot; both are the cache-off output.
    const Outcome forked_off = run(path, backend, {.cache = false, .n = 2}, {{a}, {a}});
    const Outcome forked_on = run(path, backend, {.n = 2}, {{a}, {a}});
    ASSERT_EQ(forked_on.tokens, forked_off.tokens);
    EXPECT_EQ(forked_on.cached[1], 32);
    EXPECT_EQ(forked_on.tokens[1][0], forked_on.tokens[1][1]);
}

TEST_P(HybridPrefixCache, EvictionAndFewSnapshotSlotsLoseNothing) {
    const test::RecurrentDeltaRule recurrent;
    const auto [arch, backend] = GetParam();
    const std::string path = hybrid_model(arch);
    std::vector<std::vector<int32_t>> prompts;
    const auto system = test::make_prompt(16, 9, 300);
    for (uint32_t i = 0; i < 6; ++i) {
        auto t = test::make_prompt(5 + 3 * i, 60 + i, 300);
        t[0] = int32_t(100 + i);
        prompts.push_back(i % 2 ? concat(system, t) : t);
    }
    std::vector<std::vector<std::vector<int32_t>>> waves;
    for (int round = 0; round < 3; ++round)
        for (const auto& p : prompts) waves.push_back({p});
    const Outcome off = run(path, backend, {.cache = false, .kv_tokens = 64}, waves);
    // 16 blocks of 4 tokens: the cached blocks of earlier prompts are evicted, and their snapshots with them.
    const Outcome small_pool = run(path, backend, {.kv_tokens = 64}, waves);
    ASSERT_EQ(small_pool.tokens, off.tokens);
    EXPECT_GT(small_pool.evicted_blocks, 0);
    EXPECT_LE(small_pool.stats.state_snapshots, 8);
    // One snapshot slot: every new snapshot replaces the last one, so only the last prompt, sent
    // again, resumes (at its last whole block).
    auto repeated = waves;
    repeated.push_back(waves.back());
    const Outcome repeated_off = run(path, backend, {.cache = false, .kv_tokens = 1024}, repeated);
    const Outcome one_slot = run(path, backend, {.snapshots = 1, .kv_tokens = 1024}, repeated);
    ASSERT_EQ(one_slot.tokens, repeated_off.tokens);
    EXPECT_EQ(one_slot.stats.state_snapshot_slots, 1);
    EXPECT_EQ(one_slot.stats.state_snapshots, 1);
    EXPECT_EQ(one_slot.stats.state_snapshot_restores, 1);
    EXPECT_EQ(one_slot.cached.back(), int64_t((waves.back()[0].size() - 1) / kBlock * kBlock));
    // A pool of 3 running sequences with a tight KV pool: preemption recomputes from a snapshot or zero.
    const Outcome busy_off = run(path, backend, {.cache = false, .kv_tokens = 48, .budget = 16, .max_seqs = 3},
                                 {prompts, prompts});
    const Outcome busy_on = run(path, backend, {.kv_tokens = 48, .budget = 16, .max_seqs = 3}, {prompts, prompts});
    ASSERT_EQ(busy_on.tokens, busy_off.tokens);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridPrefixCache,
                         ::testing::Values(Case{"qwen35", "cpu"}, Case{"qwen35moe", "cpu"}, Case{"qwen35", "reference"},
                                           Case{"qwen35moe", "reference"}, Case{"qwen3next", "cpu"}),
                         [](const auto& info) { return info.param.arch + "_" + info.param.backend; });

TEST(HybridPrefixCacheOptions, NoSpareSlotMeansNoCacheAndSnapshotsFollowTheSlots) {
    const std::string path = hybrid_model("qwen35");
    auto step = model::open_step_model(path, {.threads = 2, .tokens_wanted = 256, .state_slots = 6});
    // 4 seats leave 2 slots: at most 2 snapshots whatever was asked.
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 4}, .state_snapshots = 8});
    EXPECT_TRUE(core.stats().prefix_caching);
    EXPECT_EQ(core.scheduler().config().state_snapshots, 2);
    EXPECT_EQ(core.stats().state_snapshot_slots, 2);
    // 6 seats leave none: the cache is off.
    EngineCore full(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 6}, .state_snapshots = 8});
    EXPECT_FALSE(full.stats().prefix_caching);
    EXPECT_EQ(full.scheduler().config().state_snapshots, 0);
    // Asked for none: off too.
    EngineCore none(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 2}, .state_snapshots = 0});
    EXPECT_FALSE(none.stats().prefix_caching);
    EXPECT_THROW((void)EngineCore(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 2}, .state_snapshots = -1}),
                 Error);
}

}  // namespace
}  // namespace pagoda::engine
