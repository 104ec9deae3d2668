// The engine with a hybrid model (qwen35 / qwen35moe / qwen3next: gated DeltaNet layers with a per-sequence
// recurrent state beside the paged KV): a greedy request yields the same tokens alone, batched with
// others under small token budgets (chunked prefill) and block sizes, preempted and recomputed from a
// small KV pool, and as both choices of an n = 2 request (the fork copies the parent's state), with
// the CPU's delta rule token by token (hybrid_test_model.h: RecurrentDeltaRule). The
// engine caps the running sequences at its state slots, turns the prefix cache off when no slot is
// left for state snapshots (hybrid_prefix_cache_test.cpp runs it on), and refuses speculative
// decoding by name.
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

std::string hybrid_model(const std::string& arch) { return test::hybrid_test_model(arch, 13, "engine-hybrid"); }

struct Scenario {
    int64_t budget;
    int32_t max_seqs;
    int32_t block_size;
    int64_t kv_tokens;  // the pool: small ones preempt
};

struct Outcome {
    std::vector<std::vector<std::vector<int32_t>>> tokens;  // per request, per choice
    int64_t preemptions = 0;
};

Outcome run(const std::string& path, const Scenario& sc, const std::vector<std::vector<int32_t>>& prompts,
            int64_t max_tokens, int32_t n = 1) {
    auto step = model::open_step_model(path, {.threads = 2, .kv = {.block_size = sc.block_size},
                                              .tokens_wanted = sc.kv_tokens, .max_step_tokens = sc.budget,
                                              .state_slots = sc.max_seqs});
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = sc.budget, .max_seqs = sc.max_seqs}});
    Driver driver(core);
    std::vector<RequestId> ids;
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request r = test::greedy_request(prompts[i], max_tokens);
        r.n = n;
        ids.push_back(driver.add(std::move(r)));
        if (i % 3 == 2) {  // later arrivals join mid-flight
            core.step();
            driver.collect();
        }
    }
    driver.run();
    Outcome out;
    for (RequestId id : ids) {
        out.tokens.emplace_back();
        for (int32_t c = 0; c < n; ++c) {
            EXPECT_EQ(driver.results[id].choices[c].error, "");
            out.tokens.back().push_back(driver.results[id].choices[c].tokens);
        }
    }
    out.preemptions = core.stats().preemptions;
    return out;
}

class HybridEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridEngine, GreedyTokensAreTheSameAloneBatchedPreemptedAndForked) {
    const test::RecurrentDeltaRule recurrent;
    const std::string path = hybrid_model(GetParam());
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 8; ++i) prompts.push_back(test::make_prompt(3 + (i * 13) % 19, i + 1, 300));
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(run(path, {512, 1, 16, 1024}, {p}, 10).tokens[0][0]);
    for (const Scenario& sc : {Scenario{512, 8, 16, 1024}, Scenario{7, 4, 4, 1024}, Scenario{33, 8, 1, 1024}}) {
        const auto got = run(path, sc, prompts, 10);
        for (size_t i = 0; i < prompts.size(); ++i)
            ASSERT_EQ(got.tokens[i][0], alone[i]) << "budget " << sc.budget << " block size " << sc.block_size << " request " << i;
    }
    // A pool of 48 tokens for 8 sequences of up to 31: the newest are preempted and recomputed.
    const auto tight = run(path, {64, 8, 4, 48}, prompts, 10);
    EXPECT_GT(tight.preemptions, 0);
    for (size_t i = 0; i < prompts.size(); ++i) ASSERT_EQ(tight.tokens[i][0], alone[i]) << "preempted, request " << i;
    // n = 2: the second choice is a fork of the first after the prompt; greedy, both are the alone output.
    const auto forked = run(path, {512, 8, 4, 1024}, prompts, 10, 2);
    for (size_t i = 0; i < prompts.size(); ++i)
        for (int c = 0; c < 2; ++c) ASSERT_EQ(forked.tokens[i][size_t(c)], alone[i]) << "request " << i << " choice " << c;
    size_t distinct = 0;
    for (size_t i = 1; i < alone.size(); ++i) distinct += alone[i] != alone[0];
    EXPECT_GT(distinct, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridEngine, ::testing::Values("qwen35", "qwen35moe", "qwen3next"));

TEST(HybridEngineOptions, PrefixCacheOffSlotsCapTheSeatsAndSpeculationIsRefused) {
    const std::string path = hybrid_model("qwen35");
    auto step = model::open_step_model(path, {.threads = 2, .tokens_wanted = 256, .state_slots = 3});
    EXPECT_EQ(step->info().n_state_slots, 3);
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 8}});
    EXPECT_EQ(core.scheduler().config().max_seqs, 3);
    EXPECT_TRUE(core.scheduler().config().recurrent_state);
    // The same prompt twice: the second computes every token (no prefix-cache hit).
    Driver driver(core);
    const auto p = test::make_prompt(40, 3, 300);
    driver.add(test::greedy_request(p, 2));
    driver.run();
    driver.add(test::greedy_request(p, 2));
    driver.run();
    EXPECT_EQ(core.stats().prefix_hit_tokens, 0);
    EXPECT_FALSE(core.stats().prefix_caching);
    try {
        EngineCore spec(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 3}, .speculative = {.ngram_max = 3}});
        ADD_FAILURE() << "speculation on a hybrid was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("speculative decoding is not supported for a model with recurrent layers"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace pagoda::engine
