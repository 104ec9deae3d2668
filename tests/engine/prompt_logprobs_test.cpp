// Prompt logprobs: each prompt token after the first gets the log-softmax of the logits of the row
// before it, its rank and the top alternatives, on every choice's first delta. Checked against an
// independent reference (hashed_logits of each prefix, computed here without the engine) with the
// prompt in one chunk or in many, under preemption (rows recomputed, never collected twice), with
// the prefix cache warm (the request computes its prompt anyway), and for n = 2.
#include <cmath>
#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "engine/prompt_logprobs.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;

constexpr int64_t kVocab = 64;

// The reference: for prompt token i >= 1, hashed_logits of prompt[0..i) and its log-softmax.
void expect_reference(const std::vector<int32_t>& prompt, const std::vector<TokenLogprob>& got, int32_t top) {
    ASSERT_EQ(got.size(), prompt.size() - 1);
    for (size_t i = 1; i < prompt.size(); ++i) {
        std::vector<float> l(kVocab);
        test::hashed_logits(std::vector<int32_t>(prompt.begin(), prompt.begin() + std::ptrdiff_t(i)), l.data(), kVocab);
        double m = -INFINITY, sum = 0;
        for (float x : l) m = std::max(m, double(x));
        for (float x : l) sum += std::exp(double(x) - m);
        auto lp = [&](int32_t t) { return double(l[size_t(t)]) - m - std::log(sum); };
        const TokenLogprob& g = got[i - 1];
        EXPECT_EQ(g.token, prompt[i]) << i;
        EXPECT_NEAR(g.logprob, lp(prompt[i]), 1e-5) << i;
        int32_t rank = 1;
        for (int32_t t = 0; t < kVocab; ++t) rank += l[size_t(t)] > l[size_t(prompt[i])] || (l[size_t(t)] == l[size_t(prompt[i])] && t < prompt[i]);
        EXPECT_EQ(g.rank, rank) << i;
        ASSERT_EQ(g.top.size(), size_t(top)) << i;
        for (size_t k = 0; k < g.top.size(); ++k) {
            EXPECT_NEAR(g.top[k].second, lp(g.top[k].first), 1e-5);
            if (k > 0) { EXPECT_GE(g.top[k - 1].second, g.top[k].second); }
        }
        if (top > 0) {  // the best is the reference's best
            int32_t best = 0;
            for (int32_t t = 1; t < kVocab; ++t) best = l[size_t(t)] > l[size_t(best)] ? t : best;
            EXPECT_EQ(g.top[0].first, best) << i;
        }
    }
}

struct Case {
    const char* name;
    int64_t budget = 256;
    int32_t n_blocks = 1024;  // of 4 tokens
    int32_t max_seqs = 8;
    int32_t n = 1;
};

TEST(PromptLogprobs, EqualTheReferenceInOneChunkOrManyUnderPreemptionAndForEveryChoice) {
    const Case cases[] = {
        {.name = "one chunk"},
        {.name = "chunks of 5", .budget = 5, .max_seqs = 4},
        {.name = "tiny pool (preemption)", .budget = 64, .n_blocks = 30},
        {.name = "n = 2", .n = 2},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        FakeStepModel model(kVocab, c.n_blocks, 4, 1 << 20);
        EngineOptions options;
        options.scheduler = {.max_batched_tokens = c.budget, .max_seqs = c.max_seqs};
        EngineCore core(model, nullptr, options);
        Driver driver(core);
        std::vector<std::pair<RequestId, std::vector<int32_t>>> sent;
        for (uint32_t i = 0; i < 8; ++i) {
            Request r = test::greedy_request(test::make_prompt(20 + 3 * i, 100 + i, kVocab), 12);
            r.n = c.n;
            r.sampling.temperature = c.n > 1 ? 0.8f : 0.0f;
            r.sampling.seed = 5;
            r.prompt_logprobs = int32_t(i % 3) * 2;  // 0, 2, 4 alternatives
            // Every other request is plain: its rows give no prompt logprobs and break nothing.
            if (i % 2 == 1) r.prompt_logprobs = -1;
            const std::vector<int32_t> prompt = r.prompt;
            sent.push_back({driver.add(std::move(r)), prompt});
        }
        driver.run();
        if (c.n_blocks < 100) {
            EXPECT_GT(core.stats().preemptions, 0);
        }
        for (size_t i = 0; i < sent.size(); ++i) {
            const auto& res = driver.results.at(sent[i].first);
            ASSERT_TRUE(res.done);
            ASSERT_EQ(res.choices.size(), size_t(c.n));
            for (const auto& [index, choice] : res.choices) {
                EXPECT_EQ(choice.tokens.size(), 12u);
                if (i % 2 == 1) {
                    EXPECT_TRUE(choice.prompt_logprobs.empty());
                    continue;
                }
                SCOPED_TRACE(testing::Message() << "request " << i << " choice " << index);
                expect_reference(sent[i].second, choice.prompt_logprobs, int32_t(i % 3) * 2);
            }
        }
        EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    }
}

TEST(PromptLogprobs, AWarmPrefixCacheIsNotUsedForTheirPrompt) {
    FakeStepModel model(kVocab, 1024, 4, 1 << 20);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    const std::vector<int32_t> prompt = test::make_prompt(40, 7, kVocab);
    const RequestId warm = driver.add(test::greedy_request(prompt, 4));
    driver.run();
    Request r = test::greedy_request(prompt, 4);
    r.prompt_logprobs = 1;
    const RequestId id = driver.add(r);
    driver.run();
    EXPECT_EQ(driver.results.at(id).usage.cached_prompt_tokens, 0);
    expect_reference(prompt, driver.results.at(id).choices.at(0).prompt_logprobs, 1);
    EXPECT_EQ(driver.results.at(id).choices.at(0).tokens, driver.results.at(warm).choices.at(0).tokens);
    // And a plain request after it still hits the cache.
    const RequestId again = driver.add(test::greedy_request(prompt, 4));
    driver.run();
    EXPECT_GT(driver.results.at(again).usage.cached_prompt_tokens, 0);
}

TEST(PromptLogprobs, OutOfRangeIsRefused) {
    FakeStepModel model(kVocab, 64, 4, 1 << 20);
    EngineCore core(model, nullptr, {});
    Request r = test::greedy_request({1, 2, 3}, 2);
    r.prompt_logprobs = 21;
    EXPECT_THROW(core.validate(r), Error);
    r.prompt_logprobs = 20;
    EXPECT_NO_THROW(core.validate(r));
}

}  // namespace
}  // namespace pagoda::engine
