// Embedding requests through EngineCore over a FakeStepModel whose hidden state is a pure function
// of a token's context: the pooled vector must equal the one computed directly from the prompt,
// whatever the chunking, preemption, prefix cache and batch company.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;
using test::greedy_request;
using test::make_prompt;

constexpr int64_t kVocab = 48;
constexpr int64_t kDim = FakeStepModel::kHiddenSize;

// The pooled, normalised vector straight from the prompt (no engine, no KV).
std::vector<float> reference_embedding(const std::vector<int32_t>& prompt, Pooling pooling, bool normalize = true) {
    std::vector<double> sum(size_t(kDim), 0.0);
    int64_t rows = 0;
    for (size_t p = 0; p < prompt.size(); ++p) {
        if (!pools_position(pooling, int64_t(p), int64_t(prompt.size()))) continue;
        std::vector<int32_t> context(prompt.begin(), prompt.begin() + int64_t(p) + 1);
        float row[kDim];
        test::hashed_logits(context, row, kDim);
        for (int64_t i = 0; i < kDim; ++i) sum[size_t(i)] += row[i];
        ++rows;
    }
    double norm = 0;
    for (double& x : sum) x /= double(rows), norm += x * x;
    std::vector<float> out;
    for (double x : sum) out.push_back(float(normalize ? x / std::sqrt(norm) : x));
    return out;
}

Request embedding_request(std::vector<int32_t> prompt, Pooling pooling, bool normalize = true) {
    Request r;
    r.prompt = std::move(prompt);
    r.embedding = EmbeddingSpec{pooling, normalize};
    return r;
}

TEST(EmbeddingEngine, PooledVectorsMatchTheReferenceUnderChunkingAndPreemption) {
    // 9 blocks of 4 tokens and a 6-token budget: prompts are chunked and the pool is too small for
    // everything at once, so sequences are preempted and recomputed.
    FakeStepModel model(kVocab, 9, 4);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 6, .max_seqs = 4};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    struct Case { RequestId id; std::vector<int32_t> prompt; Pooling pooling; bool normalize; };
    std::vector<Case> cases;
    std::vector<std::pair<RequestId, std::vector<int32_t>>> generations;
    const Pooling poolings[] = {Pooling::mean, Pooling::last, Pooling::cls};
    for (uint32_t i = 0; i < 12; ++i) {
        if (i % 3 == 0) {  // generations beside them: they grow until the pool is short and preempt
            auto g = make_prompt(6, 7 + i, kVocab);
            generations.push_back({driver.add(greedy_request(g, 20)), g});
        }
        auto prompt = make_prompt(2 + i * 3 % 17, 100 + i, kVocab);
        const Pooling pooling = poolings[i % 3];
        const bool normalize = i % 4 != 3;
        cases.push_back({driver.add(embedding_request(prompt, pooling, normalize)), prompt, pooling, normalize});
    }
    driver.run();
    EXPECT_GT(core.stats().preemptions, 0);
    // Some embedding was preempted and recomputed: more hidden rows ran than the poolings read.
    int64_t pooled_rows = 0, hidden_rows = 0;
    for (const auto& c : cases) pooled_rows += c.pooling == Pooling::mean ? int64_t(c.prompt.size()) : 1;
    for (const auto& b : model.step_batches) hidden_rows += b.n_hidden_rows();
    EXPECT_GT(hidden_rows, pooled_rows);
    for (const auto& c : cases) {
        const auto& r = driver.results[c.id];
        ASSERT_TRUE(r.done) << c.id;
        const auto& choice = r.choices.at(0);
        EXPECT_EQ(choice.finish, FinishReason::stop);
        EXPECT_TRUE(choice.tokens.empty());
        EXPECT_EQ(choice.deltas, 1);
        ASSERT_EQ(choice.embedding.size(), size_t(kDim));
        const auto want = reference_embedding(c.prompt, c.pooling, c.normalize);
        for (int64_t i = 0; i < kDim; ++i)
            EXPECT_FLOAT_EQ(choice.embedding[size_t(i)], want[size_t(i)]) << "request " << c.id << " dim " << i;
        EXPECT_EQ(r.usage.prompt_tokens, int64_t(c.prompt.size()));
        EXPECT_EQ(r.usage.completion_tokens, 0);
    }
    for (const auto& [id, g] : generations)
        EXPECT_EQ(driver.results[id].choices.at(0).tokens, test::reference_greedy(g, 20, kVocab));
    for (int64_t n : model.step_sizes) EXPECT_LE(n, 6);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    EXPECT_EQ(core.num_requests(), 0u);
}

TEST(EmbeddingEngine, MeanPoolingComputesEveryTokenDespiteACachedPrefix) {
    FakeStepModel model(kVocab, 64, 4);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    const auto prompt = make_prompt(21, 3, kVocab);
    driver.add(greedy_request(prompt, 2));  // publishes the prompt's blocks in the prefix cache
    driver.run();
    const size_t before = model.step_batches.size();
    const RequestId mean = driver.add(embedding_request(prompt, Pooling::mean));
    const RequestId last = driver.add(embedding_request(prompt, Pooling::last));
    driver.run();
    int64_t mean_rows = 0, last_rows = 0, last_tokens = 0;
    for (size_t s = before; s < model.step_batches.size(); ++s) {
        const auto& b = model.step_batches[s];
        for (int64_t t = 0; t < b.size(); ++t) {
            EXPECT_FALSE(b.want_logits[size_t(t)]) << "an embedding asked for logits";
            (b.seq_index[size_t(t)] == 0 ? mean_rows : last_rows) += b.want_hidden[size_t(t)];
            if (b.seq_index[size_t(t)] == 1) ++last_tokens;
        }
    }
    EXPECT_EQ(mean_rows, 21);  // all of them, none from the cache
    EXPECT_EQ(last_rows, 1);
    EXPECT_LT(last_tokens, 21);  // last pooling reuses the cached prefix
    EXPECT_EQ(driver.results[mean].choices.at(0).embedding, reference_embedding(prompt, Pooling::mean));
    EXPECT_EQ(driver.results[last].choices.at(0).embedding, reference_embedding(prompt, Pooling::last));
}

TEST(EmbeddingEngine, InvalidEmbeddingRequestsAreRefused) {
    FakeStepModel model(kVocab, 8, 4);  // 32 tokens of KV
    EngineCore core(model, nullptr, {});
    auto r = embedding_request(make_prompt(32, 1, kVocab), Pooling::mean);
    EXPECT_NO_THROW(core.validate(r));  // a whole context: nothing is generated after it
    r.prompt.push_back(1);
    EXPECT_THROW(core.validate(r), Error);
    r = embedding_request(make_prompt(4, 1, kVocab), Pooling::mean);
    r.n = 2;
    EXPECT_THROW(core.validate(r), Error);
    r.n = 1;
    r.logprobs = 0;
    EXPECT_THROW(core.validate(r), Error);
}

TEST(PooledEmbedding, RecomputedRowsAreIgnoredAndGapsRefused) {
    PooledEmbedding p({Pooling::mean, false}, 3, 2);
    const float a[] = {1, 2}, b[] = {3, 4}, c[] = {5, 9};
    p.add(0, a);
    p.add(1, b);
    EXPECT_FALSE(p.complete());
    EXPECT_THROW(p.result(), Error);
    p.add(0, c);  // a preempted sequence recomputing position 0
    p.add(2, c);
    ASSERT_TRUE(p.complete());
    EXPECT_EQ(p.result(), (std::vector<float>{3, 5}));
    PooledEmbedding gap({Pooling::mean, false}, 3, 2);
    EXPECT_THROW(gap.add(1, a), Error);
    PooledEmbedding last({Pooling::last, true}, 3, 2);
    EXPECT_THROW(last.add(1, a), Error);
    const float v[] = {3, 4};
    last.add(2, v);
    EXPECT_EQ(last.result(), (std::vector<float>{0.6f, 0.8f}));
    EXPECT_EQ(parse_pooling("first"), Pooling::cls);
    EXPECT_EQ(parse_pooling("max"), std::nullopt);
    EXPECT_EQ(pooling_from_gguf(1), Pooling::mean);
    EXPECT_EQ(pooling_from_gguf(0), std::nullopt);
}

}  // namespace
}  // namespace pagoda::engine
