// A pure sliding-window model (phi3 with every layer's window 8) through the engine: the blocks
// outside the window are freed as it generates, so a long generation holds a bounded number of
// KV blocks, eight long generations share a pool that could not hold one of them unfreed without
// preemption, and the tokens equal plain greedy decoding that frees nothing. A model with a global
// layer (gemma2) keeps every block.
#include <algorithm>
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::engine {
namespace {

std::string model_path(const std::string& arch) {
    model::RandomModelSpec spec;
    spec.arch = arch; spec.vocab_size = 300; spec.head_dim = 16; spec.sliding_window = 8; spec.seed = 50;
    spec.context_length = 4096;
    const std::string path = pagoda::test::temp_path("swa_memory_" + arch + ".gguf");
    model::write_random_model(spec, nullptr, path);
    return path;
}

// Greedy tokens without the engine; `free` false: a runner that keeps every block (the unfreed twin).
std::vector<int32_t> plain_greedy(const std::string& path, const std::vector<int32_t>& prompt, int n,
                                  bool free = false, int64_t pool_tokens = 1024, int32_t* max_used = nullptr) {
    auto model = model::open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = pool_tokens});
    model::SequenceRunner runner(*model, true, free);
    auto logits = runner.prefill(0, prompt);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        out.push_back(next);
        if (i + 1 < n) logits = runner.decode(0, next);
        if (max_used) *max_used = std::max(*max_used, runner.blocks().num_used_blocks());
    }
    return out;
}

struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    int32_t max_used_blocks = 0;
    int64_t preemptions = 0;
};

Outcome generate(const std::string& path, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens) {
    auto step = model::open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = 256});
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = 64, .max_seqs = 8}});
    test::Driver driver(core);
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(driver.add(test::greedy_request(p, max_tokens)));
    Outcome run;
    for (int i = 0; core.has_work() && i < 100000; ++i) {
        core.step();
        driver.collect();
        run.max_used_blocks = std::max(run.max_used_blocks, core.blocks().num_used_blocks());
    }
    run.preemptions = core.stats().preemptions;
    for (RequestId id : ids) run.tokens.push_back(driver.results[id].choices[0].tokens);
    return run;
}

TEST(SlidingWindowMemory, PureSlidingModelHoldsBoundedBlocks) {
    const std::string path = model_path("phi3");
    EXPECT_EQ(model::open_step_model(path, {.threads = 1, .tokens_wanted = 64})->info().sliding_window, 8);
    const std::vector<int32_t> prompt = test::make_prompt(6, 3, 300);
    const int64_t n = 240;  // 246 tokens: 62 blocks of 4 unfreed, of a pool of 64
    const Outcome one = generate(path, {prompt}, n);
    ASSERT_EQ(one.tokens[0].size(), size_t(n));
    EXPECT_LE(one.max_used_blocks, 4);  // the window's 2-3 blocks and the next token's
    EXPECT_EQ(one.tokens[0], plain_greedy(path, prompt, int(n)));
    // Eight of them at once: 8 x 62 blocks unfreed, within 8 x 4 freed; no preemption.
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 8; ++i) prompts.push_back(test::make_prompt(6, 3 + i, 300));
    const Outcome eight = generate(path, prompts, n);
    EXPECT_EQ(eight.preemptions, 0);
    EXPECT_LE(eight.max_used_blocks, 32);
    EXPECT_EQ(eight.tokens[0], one.tokens[0]);
}

// run / bench / perplexity (SequenceRunner) free the same way: a 246-token generation in a pool of
// 16 blocks of 4, the unfreed twin's tokens exactly.
TEST(SlidingWindowMemory, SequenceRunnerFreesBelowTheWindow) {
    const std::string path = model_path("phi3");
    const std::vector<int32_t> prompt = test::make_prompt(6, 3, 300);
    int32_t max_used = 0;
    const std::vector<int32_t> freed = plain_greedy(path, prompt, 240, true, 64, &max_used);
    EXPECT_LE(max_used, 4);
    EXPECT_EQ(freed, plain_greedy(path, prompt, 240));
    EXPECT_THROW(plain_greedy(path, prompt, 240, false, 64), Error) << "unfreed, 246 tokens do not fit 64";
}

TEST(SlidingWindowMemory, ModelWithAGlobalLayerKeepsEveryBlock) {
    const std::string path = model_path("gemma2");  // layer 1 attends globally
    EXPECT_EQ(model::open_step_model(path, {.threads = 1, .tokens_wanted = 64})->info().sliding_window, 0);
    const Outcome one = generate(path, {test::make_prompt(6, 3, 300)}, 100);
    EXPECT_GE(one.max_used_blocks, 26);  // 106 tokens in blocks of 4
}

}  // namespace
}  // namespace pagoda::engine
