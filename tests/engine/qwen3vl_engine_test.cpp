// Qwen3-VL images through the engine (Request::images with their merged grids, M-RoPE) on a random
// qwen3vl model with deep-stack slices (CPU backend): greedy tokens equal the SequenceRunner's (an
// independent path: no scheduler, its own chunking) alone, beside other requests, in chunks of 4
// tokens, under preemption, forked (n = 2), on prefix-cache hits (whole and inside an image) and
// with prompt-lookup drafts; every row's rotary positions equal transformers' layout as
// vision::qwen3vl_rope_positions writes it, image rows stay causal; the refusals name the problem.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "vision/qwen3vl_layout.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::greedy_request;
using test::RecordingModel;

constexpr int32_t kBlock = 4, kPad = 319, kVocab = 320;
constexpr int64_t kDim = 64, kWidth = 3 * kDim;  // 3 layers: 2 deep-stack slices per image row

std::shared_ptr<const gguf::File> qwen3vl_file() {
    static std::shared_ptr<const gguf::File> f = [] {
        model::RandomModelSpec s;
        s.arch = "qwen3vl"; s.n_layers = 3; s.dim = kDim; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96;
        s.vocab_size = kVocab; s.image_tokens = true; s.rope_theta = 1e4f; s.seed = 17;
        const std::string path = pagoda::test::temp_path("qwen3vl_engine.gguf");
        model::write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return f;
}

std::unique_ptr<model::StepModel> open_model(int64_t pool_tokens = 512) {
    return model::open_step_model(qwen3vl_file(), {.backend = "cpu", .threads = 1,
                                                   .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32},
                                                   .tokens_wanted = pool_tokens});
}

PromptImage image(int64_t begin, int64_t gh, int64_t gw, uint64_t seed) {
    PromptImage im{.begin = begin, .rows = gh * gw, .hash = seed, .grid_h = gh, .grid_w = gw};
    im.embeddings.resize(size_t(im.rows * kWidth));
    for (size_t i = 0; i < im.embeddings.size(); ++i) im.embeddings[i] = float(std::sin(double(i) * 0.23 + double(seed)));
    return im;
}

// Text, then each image's pad rows, then text: `length` tokens in all.
Request image_request(const std::vector<PromptImage>& images, int64_t length, int32_t salt, int64_t max_tokens) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < length; ++i) p.push_back(int32_t((i * 31 + 5 + salt) % 300));
    for (const PromptImage& im : images)
        for (int64_t i = im.begin; i < im.begin + im.rows; ++i) p[size_t(i)] = kPad;
    Request r = greedy_request(std::move(p), max_tokens);
    r.images = images;
    return r;
}

// The oracle: SequenceRunner's greedy tokens for the same prompt and images (whole prompt, no cache).
std::vector<int32_t> runner_greedy(const Request& r) {
    auto m = open_model();
    model::SequenceRunner runner(*m, false);
    std::vector<model::ImageSpan> spans;
    for (const PromptImage& im : r.images)
        spans.push_back({.begin = im.begin, .rows = im.rows, .embeddings = im.embeddings, .hash = im.hash,
                         .grid_h = im.grid_h, .grid_w = im.grid_w});
    runner.set_images(0, spans);
    std::vector<float> logits = runner.prefill(0, r.prompt, 1024);
    std::vector<int32_t> out;
    while (int64_t(out.size()) < r.stop.max_tokens) {
        out.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        logits = runner.decode(0, out.back());
    }
    return out;
}

// Every recorded row of a request with these images (found by its block table's sequence and its
// prompt tokens) carries transformers' rotary position for its KV position, and image rows attend
// causally.
void expect_layout(const std::vector<model::Batch>& steps, const std::vector<PromptImage>& images) {
    std::vector<vision::ImagePlacement> places;
    for (const PromptImage& im : images) places.push_back({.first = im.begin, .grid_h = im.grid_h, .grid_w = im.grid_w});
    const std::vector<int32_t> want = vision::qwen3vl_rope_positions(256, places);
    int64_t checked = 0;
    for (const model::Batch& b : steps) {
        ASSERT_EQ(b.rope_positions.size(), 3 * b.tokens.size()) << "a step with an M-RoPE sequence gives every row's";
        for (size_t k = 0; k < b.embedding_rows.size(); ++k) {
            const auto row = size_t(b.embedding_rows[k]);
            EXPECT_EQ(b.attend_until[row], b.positions[row]) << "a Qwen3-VL image row attends causally";
        }
        for (size_t t = 0; t < b.tokens.size(); ++t) {
            const auto p = size_t(b.positions[t]);
            for (size_t a = 0; a < 3; ++a)
                EXPECT_EQ(b.rope_positions[3 * t + a], want[3 * p + a]) << "position " << p << " axis " << a;
            ++checked;
        }
    }
    EXPECT_GT(checked, 0);
}

TEST(EngineQwen3Vl, ModelDeclaresMrope) {
    EXPECT_TRUE(open_model()->info().mrope);
    EXPECT_TRUE(open_model()->info().image_input);
}

TEST(EngineQwen3Vl, GreedyMatchesTheSequenceRunnerInChunksOfFour) {
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineOptions options;
    options.prefix_caching = false;
    options.scheduler = {.max_batched_tokens = 4, .max_seqs = 2};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    // Text 0..2, a 2 x 2 image at 3..6, text 7..9, a 1 x 3 image at 10..12, text 13..17.
    const Request r = image_request({image(3, 2, 2, 1), image(10, 1, 3, 2)}, 18, 0, 8);
    const RequestId id = driver.add(r);
    driver.run();
    ASSERT_TRUE(driver.results[id].done);
    EXPECT_EQ(driver.results[id].choices[0].tokens, runner_greedy(r));
    expect_layout(model.steps, r.images);
    for (const model::Batch& b : model.steps) EXPECT_LE(b.size(), 4);
}

TEST(EngineQwen3Vl, SameTokensAloneAndBesideOtherRequests) {
    const Request r = image_request({image(2, 2, 3, 5), image(12, 3, 2, 6)}, 22, 1, 8);
    const std::vector<int32_t> want = runner_greedy(r);
    {
        auto model = open_model();
        EngineCore core(*model, nullptr, {});
        Driver driver(core);
        const RequestId id = driver.add(r);
        driver.run();
        EXPECT_EQ(driver.results[id].choices[0].tokens, want) << "alone";
    }
    auto model = open_model();
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 16, .max_seqs = 4, .max_image_tokens = 8};
    EngineCore core(*model, nullptr, options);
    Driver driver(core);
    const Request other = image_request({image(0, 2, 4, 9)}, 14, 2, 5);
    const Request text = greedy_request(image_request({}, 9, 3, 7).prompt, 7);
    const RequestId a = driver.add(other), b = driver.add(text), id = driver.add(r);
    driver.run();
    EXPECT_EQ(driver.results[id].choices[0].tokens, want) << "batched";
    EXPECT_EQ(driver.results[a].choices[0].tokens, runner_greedy(other));
    EXPECT_EQ(driver.results[b].choices[0].tokens, runner_greedy(text));
}

TEST(EngineQwen3Vl, PreemptionRecomputesTheSamePositions) {
    // 20 blocks of 4 tokens for three requests of 18 + 14 tokens each: some are preempted and
    // recomputed (their images too) while others decode.
    auto model = open_model(80);
    EngineOptions options;
    options.prefix_caching = false;
    options.scheduler = {.max_batched_tokens = 16, .max_seqs = 3, .max_image_tokens = 8};
    EngineCore core(*model, nullptr, options);
    Driver driver(core);
    std::vector<Request> all;
    std::vector<RequestId> ids;
    for (int32_t i = 0; i < 3; ++i) {
        all.push_back(image_request({image(2 + i, 2, 3, 20 + uint64_t(i))}, 18, 7 * i, 14));
        ids.push_back(driver.add(all.back()));
    }
    driver.run();
    EXPECT_GT(core.stats().preemptions, 0) << "the pool never ran short: the test checks no recompute";
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(driver.results[ids[i]].choices[0].tokens, runner_greedy(all[i])) << i;
}

TEST(EngineQwen3Vl, ForkedChoicesContinueFromTheImagePositions) {
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineCore core(model, nullptr, {});
    Driver driver(core);
    Request r = image_request({image(3, 3, 2, 31)}, 14, 5, 6);
    r.n = 2;
    const RequestId id = driver.add(r);
    driver.run();
    const auto want = runner_greedy(r);
    ASSERT_EQ(driver.results[id].choices.size(), 2u);
    for (const auto& [index, c] : driver.results[id].choices) EXPECT_EQ(c.tokens, want) << "choice " << index;
    expect_layout(model.steps, r.images);
}

TEST(EngineQwen3Vl, PrefixCacheHitsGiveTheRecomputedPositions) {
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 12, .max_seqs = 2, .max_image_tokens = 12};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    const Request r = image_request({image(2, 2, 3, 41), image(10, 2, 2, 42)}, 22, 0, 6);
    const RequestId first = driver.add(r);
    driver.run();
    model.steps.clear();
    const RequestId again = driver.add(r);
    driver.run();
    EXPECT_EQ(driver.results[again].usage.cached_prompt_tokens, 20);  // 5 full blocks; the last token is computed
    EXPECT_EQ(driver.results[again].choices[0].tokens, driver.results[first].choices[0].tokens);
    EXPECT_EQ(driver.results[first].choices[0].tokens, runner_greedy(r));
    expect_layout(model.steps, r.images);
    // A prompt that ends inside the second image's rows is another prompt; one that shares the first
    // 12 tokens (the cache serves 3 blocks, inside the second image) runs the image's rest whole.
    Request part = r;
    part.prompt.resize(14);
    part.prompt.push_back(11);
    part.prompt.push_back(12);
    model.steps.clear();
    const RequestId partial = driver.add(part);
    driver.run();
    EXPECT_EQ(driver.results[partial].usage.cached_prompt_tokens, 12);
    EXPECT_EQ(driver.results[partial].choices[0].tokens, runner_greedy(part));
    expect_layout(model.steps, part.images);
    // Another picture with the same pad ids misses.
    Request other = r;
    other.images[0] = image(2, 2, 3, 43);
    const RequestId different = driver.add(other);
    driver.run();
    EXPECT_EQ(driver.results[different].usage.cached_prompt_tokens, 0);
}

TEST(EngineQwen3Vl, SpeculativeDraftsKeepTheGreedyTokens) {
    auto model = open_model();
    test::expect_drafts_keep_greedy(*model, image_request({image(3, 2, 3, 51)}, 16, 2, 24), runner_greedy);
}

TEST(EngineQwen3Vl, RefusalsNameTheProblem) {
    auto model = open_model();
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = 4, .max_image_tokens = 8};
    EngineCore core(*model, nullptr, options);
    auto refused = [&](const Request& r, const std::string& want) { test::expect_refused(core, r, want); };
    refused(image_request({image(2, 3, 3, 1)}, 20, 0, 2), "an image of 9 tokens is more than the 8 image tokens one step");
    Request no_grid = image_request({image(2, 2, 3, 1)}, 20, 0, 2);
    no_grid.images[0].grid_h = no_grid.images[0].grid_w = 0;
    refused(no_grid, "image 0 of 6 rows needs its merged grid (grid_h x grid_w = rows) for this model's M-RoPE, got 0 x 0");
    Request wrong_grid = image_request({image(2, 2, 3, 1)}, 20, 0, 2);
    wrong_grid.images[0].grid_w = 2;
    refused(wrong_grid, "got 2 x 2");
    Request narrow = image_request({image(2, 2, 3, 1)}, 20, 0, 2);
    narrow.images[0].embeddings.resize(size_t(6 * kDim));
    refused(narrow, "image 0 has 384 embedding values, not 6 rows of the model's width 192");
    EXPECT_NO_THROW(core.validate(image_request({image(2, 2, 4, 1)}, 20, 0, 2)));
}

}  // namespace
}  // namespace pagoda::engine
