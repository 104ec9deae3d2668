// Scoring requests (token_scores.h) through EngineCore over a FakeStepModel whose logits are a pure
// function of a token's context: the chosen logits must be exactly the prompt's last-position
// logits computed directly, whatever the chunking, preemption, prefix cache and batch company.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "engine/token_scores.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;
using test::greedy_request;
using test::make_prompt;

constexpr int64_t kVocab = 48;

Request scoring_request(std::vector<int32_t> prompt, std::vector<int32_t> ids) {
    Request r;
    r.prompt = std::move(prompt);
    r.score_tokens = std::move(ids);
    r.stop.max_tokens = 1;
    return r;
}

// The logits of `ids` after the whole prompt, straight from the model's function (no engine, no KV).
std::vector<float> reference_logits(const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids) {
    std::vector<float> row(static_cast<size_t>(kVocab));
    test::hashed_logits(prompt, row.data(), kVocab);
    std::vector<float> out;
    for (int32_t id : ids) out.push_back(row[size_t(id)]);
    return out;
}

TEST(TokenScoresEngine, ChosenLogitsMatchTheModelUnderChunkingPreemptionAndPrefixCache) {
    // 9 blocks of 4 tokens and a 6-token budget: prompts are chunked, the pool is short, sequences
    // are preempted and recomputed; drafting by prompt lookup runs beside them.
    FakeStepModel model(kVocab, 9, 4);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 6, .max_seqs = 4};
    options.speculative.ngram_max = 2;
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    struct Case { RequestId id; std::vector<int32_t> prompt; std::vector<int32_t> ids; };
    std::vector<Case> cases;
    std::vector<std::pair<RequestId, std::vector<int32_t>>> generations;
    const auto shared = make_prompt(8, 77, kVocab);  // a prefix several prompts share (prefix cache)
    for (uint32_t i = 0; i < 12; ++i) {
        if (i % 3 == 0) {
            auto g = make_prompt(6, 7 + i, kVocab);
            generations.push_back({driver.add(greedy_request(g, 20)), g});
        }
        auto prompt = make_prompt(1 + i * 5 % 19, 200 + i, kVocab);
        if (i % 2 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.end());
        std::vector<int32_t> ids = {int32_t(i % kVocab), int32_t((i * 7 + 3) % kVocab)};
        if (i % 4 == 1) ids.push_back(int32_t(kVocab - 1));  // any number of ids, in the order asked
        cases.push_back({driver.add(scoring_request(prompt, ids)), prompt, ids});
    }
    driver.run();
    EXPECT_GT(core.stats().preemptions, 0);
    for (const auto& c : cases) {
        const auto& r = driver.results[c.id];
        ASSERT_TRUE(r.done) << c.id;
        const auto& choice = r.choices.at(0);
        EXPECT_EQ(choice.finish, FinishReason::stop);
        EXPECT_TRUE(choice.tokens.empty()) << "a scoring request generated a token";
        EXPECT_EQ(choice.deltas, 1);
        EXPECT_EQ(choice.token_logits, reference_logits(c.prompt, c.ids)) << "request " << c.id;
        EXPECT_EQ(r.usage.prompt_tokens, int64_t(c.prompt.size()));
        EXPECT_EQ(r.usage.completion_tokens, 0);
    }
    for (const auto& [id, g] : generations)
        EXPECT_EQ(driver.results[id].choices.at(0).tokens, test::reference_greedy(g, 20, kVocab));
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    EXPECT_EQ(core.num_requests(), 0u);
}

TEST(TokenScoresEngine, AFullyCachedPromptStillComputesItsLastPosition) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    const auto prompt = make_prompt(17, 5, kVocab);
    const RequestId first = driver.add(scoring_request(prompt, {3, 4}));
    driver.run();
    const RequestId again = driver.add(scoring_request(prompt, {4, 3}));
    driver.run();
    EXPECT_EQ(driver.results[first].choices.at(0).token_logits, reference_logits(prompt, {3, 4}));
    EXPECT_EQ(driver.results[again].choices.at(0).token_logits, reference_logits(prompt, {4, 3}));
    EXPECT_GT(driver.results[again].usage.cached_prompt_tokens, 0);
}

TEST(TokenScoresEngine, InvalidScoringRequestsAreRefused) {
    FakeStepModel model(kVocab, 8, 4);  // 32 tokens of KV
    EngineCore core(model, nullptr, {});
    EXPECT_NO_THROW(core.validate(scoring_request(make_prompt(32, 1, kVocab), {1, 2})));  // nothing follows it
    EXPECT_THROW(core.validate(scoring_request(make_prompt(33, 1, kVocab), {1, 2})), Error);
    EXPECT_THROW(core.validate(scoring_request(make_prompt(4, 1, kVocab), {1, int32_t(kVocab)})), Error);
    EXPECT_THROW(core.validate(scoring_request(make_prompt(4, 1, kVocab), {-1})), Error);
    auto two = scoring_request(make_prompt(4, 1, kVocab), {1});
    two.n = 2;
    EXPECT_THROW(core.validate(two), Error);
    auto lp = scoring_request(make_prompt(4, 1, kVocab), {1});
    lp.logprobs = 2;
    EXPECT_THROW(core.validate(lp), Error);
    auto both = scoring_request(make_prompt(4, 1, kVocab), {1});
    both.embedding = EmbeddingSpec{};
    EXPECT_THROW(core.validate(both), Error);
}

TEST(TokenScores, YesProbabilityIsTheTwoWaySoftmax) {
    EXPECT_DOUBLE_EQ(yes_probability(1.5f, 1.5f), 0.5);
    EXPECT_NEAR(yes_probability(2.0f, 0.0f), 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
    EXPECT_NEAR(yes_probability(0.0f, 2.0f), std::exp(0.0) / (std::exp(0.0) + std::exp(2.0)), 1e-15);
    EXPECT_NEAR(yes_probability(3.0f, -1.0f) + yes_probability(-1.0f, 3.0f), 1.0, 1e-15);
    // Far apart: no overflow, and the small side keeps its value instead of rounding to 0.
    EXPECT_EQ(yes_probability(1000.0f, -1000.0f), 1.0);
    EXPECT_GT(yes_probability(-500.0f, 0.0f), 0.0);
    EXPECT_NEAR(yes_probability(-500.0f, 0.0f) / std::exp(-500.0), 1.0, 1e-12);
}

}  // namespace
}  // namespace pagoda::engine
