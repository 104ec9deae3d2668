// Encoder (bert) embedding requests through EngineCore on a real random bert model: each text runs
// whole in one step (batched with the others that fit), its vector equals the pooled rows of the
// text run alone, its KV never enters the prefix cache, and requests an embedding model cannot
// serve (generation, a text longer than a step) are refused with clear errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::make_prompt;

constexpr int32_t kBlock = 4;

std::unique_ptr<model::StepModel> random_bert_model() {
    model::RandomModelSpec spec;
    spec.arch = "bert";
    spec.n_layers = 2; spec.dim = 32; spec.n_heads = 4; spec.ffn_dim = 64; spec.vocab_size = 200;
    spec.context_length = 128;
    const std::string path = pagoda::test::temp_path("encoder_engine_bert.gguf");
    model::write_random_model(spec, nullptr, path);
    return model::open_step_model(path, {.threads = 2, .kv = {.block_size = kBlock}, .tokens_wanted = 256});
}

// The pooled vector of `prompt` computed alone, straight from the model (one step, fresh blocks).
std::vector<float> embed_alone(model::StepModel& m, const std::vector<int32_t>& prompt, EmbeddingSpec spec) {
    model::Batch b;
    std::vector<int32_t> blocks;
    for (int32_t i = 0; i < int32_t((prompt.size() + kBlock - 1) / kBlock); ++i) blocks.push_back(i);
    const int32_t index = b.add_sequence(blocks);
    for (size_t p = 0; p < prompt.size(); ++p)
        b.add(prompt[p], int32_t(p), index, int64_t(blocks[p / kBlock]) * kBlock + int64_t(p) % kBlock, false,
              pools_position(spec.pooling, int64_t(p), int64_t(prompt.size())));
    m.forward(b);
    PooledEmbedding pooled(spec, int64_t(prompt.size()), m.info().hidden_size);
    int64_t row = 0;
    for (size_t p = 0; p < prompt.size(); ++p)
        if (pools_position(spec.pooling, int64_t(p), int64_t(prompt.size())))
            pooled.add(int64_t(p), m.hidden_rows().data() + row++ * m.info().hidden_size);
    return pooled.result();
}

Request embedding_request(std::vector<int32_t> prompt, Pooling pooling) {
    Request r;
    r.prompt = std::move(prompt);
    r.embedding = EmbeddingSpec{pooling, true};
    return r;
}

TEST(EncoderEngine, EachTextRunsWholeBatchedAndItsKvIsNeverCached) {
    auto model = random_bert_model();
    ASSERT_TRUE(model->info().bidirectional);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = 8};
    EngineCore core(*model, nullptr, options);
    Driver driver(core);
    const int64_t vocab = model->info().vocab_size;
    // 40 + 30 + 20 + 9 tokens: a 64-token budget fits two or three per step, never a part of one.
    const std::vector<std::pair<std::vector<int32_t>, Pooling>> inputs = {
        {make_prompt(40, 1, vocab), Pooling::mean}, {make_prompt(30, 2, vocab), Pooling::cls},
        {make_prompt(20, 3, vocab), Pooling::mean}, {make_prompt(9, 4, vocab), Pooling::last}};
    std::vector<RequestId> ids;
    for (const auto& [prompt, pooling] : inputs) ids.push_back(driver.add(embedding_request(prompt, pooling)));
    // The same 40-token text again: were its blocks cached, it would be served from them.
    ids.push_back(driver.add(embedding_request(inputs[0].first, Pooling::mean)));
    int steps = 0;
    while (core.has_work()) {
        ASSERT_TRUE(core.step());
        driver.collect();
        ++steps;
        EXPECT_EQ(core.blocks().num_evictable_blocks(), 0) << "an encoder block entered the prefix cache";
    }
    // Whole texts, first come first served, batched while they fit: [40], [30 20 9], [40 again].
    EXPECT_EQ(steps, 3);
    for (size_t i = 0; i < ids.size(); ++i) {
        const auto& result = driver.results[ids[i]];
        ASSERT_TRUE(result.done) << i;
        const auto& choice = result.choices.at(0);
        ASSERT_TRUE(choice.error.empty()) << choice.error;
        const auto& [prompt, pooling] = inputs[i < inputs.size() ? i : 0];
        EXPECT_EQ(choice.embedding, embed_alone(*model, prompt, {i < inputs.size() ? pooling : Pooling::mean, true}))
            << "request " << i;
        EXPECT_EQ(result.usage.cached_prompt_tokens, 0) << "request " << i;
    }
    EXPECT_EQ(core.blocks().num_free_blocks(), core.blocks().n_blocks());
}

TEST(EncoderEngine, RefusesGenerationAndTextsLongerThanAStep) {
    auto model = random_bert_model();
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 32, .max_seqs = 4};
    EngineCore core(*model, nullptr, options);
    auto refused = [&](Request r, const std::string& want) {
        try {
            core.validate(r);
            ADD_FAILURE() << "accepted; wanted an error with: " << want;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
    };
    refused(test::greedy_request(make_prompt(5, 1, 200), 4), "is an embedding model");
    refused(embedding_request(make_prompt(33, 1, 200), Pooling::mean), "more than the 32 an encoder step takes");
    core.validate(embedding_request(make_prompt(32, 1, 200), Pooling::mean));  // a whole step is fine
}

}  // namespace
}  // namespace pagoda::engine
