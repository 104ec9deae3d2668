// Images through the engine (Request::images) on a random Gemma 3 (CPU backend): greedy tokens
// equal the SequenceRunner's (an independent path: its own chunking, no scheduler) under a small
// step budget, every step computes an image whole, the same request alone and beside others gives
// the same tokens, a repeated image hits the prefix cache (another image with the same placeholder
// ids does not), n > 1 shares the image's KV, prompt-lookup speculation keeps the greedy tokens,
// and the refusals name the problem.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::greedy_request;
using test::RecordingModel;

constexpr int32_t kBlock = 4;
constexpr int64_t kDim = 48, kVocab = 300;
constexpr int32_t kPlaceholder = 7;

std::shared_ptr<const gguf::File> gemma3_file() {
    static std::shared_ptr<const gguf::File> file = [] {
        model::RandomModelSpec s;
        s.arch = "gemma3"; s.n_layers = 2; s.dim = kDim; s.n_heads = 6; s.n_kv_heads = 2; s.head_dim = 16;
        s.ffn_dim = 72; s.vocab_size = kVocab; s.sliding_window = 24; s.swa_period = 2; s.rope_theta = 1e6f; s.seed = 33;
        const std::string path = pagoda::test::temp_path("image_engine_gemma3.gguf");
        model::write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return file;
}

std::unique_ptr<model::StepModel> open_model() {
    return model::open_step_model(gemma3_file(), {.backend = "cpu", .threads = 1,
                                                  .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32},
                                                  .tokens_wanted = 256});
}

PromptImage image(int64_t begin, int64_t rows, uint64_t seed) {
    PromptImage im{.begin = begin, .rows = rows, .embeddings = std::vector<float>(size_t(rows * kDim)), .hash = seed};
    for (size_t i = 0; i < im.embeddings.size(); ++i)
        im.embeddings[i] = float(std::sin(double(i) * 0.37 + double(seed))) * 2.0f;
    return im;
}

// Text, then each image's placeholder rows, then text: `length` tokens in all.
std::vector<int32_t> prompt_with(const std::vector<PromptImage>& images, int64_t length, int32_t salt) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < length; ++i) p.push_back(int32_t((i * 37 + 11 + salt) % kVocab));
    for (const PromptImage& im : images)
        for (int64_t i = im.begin; i < im.begin + im.rows; ++i) p[size_t(i)] = kPlaceholder;
    return p;
}

Request image_request(const std::vector<PromptImage>& images, int64_t length, int32_t salt, int64_t max_tokens) {
    Request r = greedy_request(prompt_with(images, length, salt), max_tokens);
    r.images = images;
    return r;
}

// The oracle: the SequenceRunner's greedy tokens for the same prompt and images.
std::vector<int32_t> runner_greedy(const Request& r) {
    auto m = open_model();
    model::SequenceRunner runner(*m, false);
    std::vector<model::ImageSpan> spans;
    for (const PromptImage& im : r.images) spans.push_back({im.begin, im.rows, im.embeddings, im.hash});
    runner.set_images(0, spans);
    std::vector<float> logits = runner.prefill(0, r.prompt, 1024);
    std::vector<int32_t> out;
    while (int64_t(out.size()) < r.stop.max_tokens) {
        out.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        logits = runner.decode(0, out.back());
    }
    return out;
}

// Every image row in every recorded step comes with all the rows of its image.
void expect_images_whole(const std::vector<model::Batch>& steps, int64_t want_rows) {
    int64_t image_rows = 0;
    for (const model::Batch& b : steps) {
        for (size_t k = 0; k < b.embedding_rows.size(); ++k) {
            const int32_t row = b.embedding_rows[k];
            const int32_t last = b.attend_until[size_t(row)];
            // The image's last position is in this step, in the same sequence.
            bool found = false;
            for (size_t j = 0; j < b.tokens.size(); ++j)
                found = found || (b.seq_index[j] == b.seq_index[size_t(row)] && b.positions[j] == last);
            EXPECT_TRUE(found) << "an image row at position " << b.positions[size_t(row)] << " without its image's end "
                               << last << " in the step";
            EXPECT_EQ(b.tokens[size_t(row)], kPlaceholder);
        }
        image_rows += int64_t(b.embedding_rows.size());
    }
    EXPECT_EQ(image_rows, want_rows) << "every image row computed exactly once";
}

TEST(EngineImages, GreedyMatchesTheSequenceRunnerAndChunksNeverSplitAnImage) {
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineOptions options;
    options.prefix_caching = false;
    options.scheduler = {.max_batched_tokens = 10, .max_seqs = 2};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    // Text 0..5, an image at 6..13 (does not fit the first step's 10 tokens), text, a second image.
    const Request r = image_request({image(6, 8, 1), image(17, 5, 2)}, 25, 0, 6);
    const RequestId id = driver.add(r);
    driver.run();
    ASSERT_TRUE(driver.results[id].done);
    EXPECT_EQ(driver.results[id].choices[0].tokens, runner_greedy(r));
    expect_images_whole(model.steps, 13);
    ASSERT_GE(model.steps.size(), 3u);
    EXPECT_EQ(model.steps[0].size(), 6) << "the first chunk ends before the image it cannot hold";
    EXPECT_TRUE(model.steps[0].embedding_rows.empty());
}

TEST(EngineImages, SameTokensAloneAndBesideOtherRequests) {
    const Request r = image_request({image(3, 8, 5)}, 18, 1, 8);
    std::vector<int32_t> alone;
    {
        auto model = open_model();
        EngineCore core(*model, nullptr, {});
        Driver driver(core);
        const RequestId id = driver.add(r);
        driver.run();
        alone = driver.results[id].choices[0].tokens;
    }
    ASSERT_EQ(alone.size(), 8u);
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 16, .max_seqs = 4, .max_image_tokens = 12};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    std::vector<Request> all = {image_request({image(2, 6, 9)}, 14, 2, 5), greedy_request(prompt_with({}, 9, 3), 7)};
    for (const Request& other : all) driver.add(other);
    const RequestId id = driver.add(r);
    all.push_back(r);
    all.push_back(image_request({image(0, 10, 4), image(12, 2, 6)}, 20, 4, 4));
    driver.add(all.back());
    driver.run();
    EXPECT_EQ(driver.results[id].choices[0].tokens, alone);
    expect_images_whole(model.steps, 6 + 8 + 12);
    for (const model::Batch& b : model.steps) {
        EXPECT_LE(b.size(), 16);
        EXPECT_LE(int64_t(b.embedding_rows.size()), 12) << "the step's image-token bound";
    }
}

TEST(EngineImages, RepeatedImageHitsThePrefixCacheAndAnotherImageDoesNot) {
    auto model = open_model();
    EngineCore core(*model, nullptr, {});
    Driver driver(core);
    const Request r = image_request({image(4, 8, 11)}, 18, 0, 5);
    const RequestId first = driver.add(r);
    driver.run();
    const RequestId again = driver.add(r);
    driver.run();
    Request other = r;
    other.images = {image(4, 8, 12)};  // same placeholder ids, another picture
    const RequestId different = driver.add(other);
    driver.run();
    EXPECT_EQ(driver.results[first].usage.cached_prompt_tokens, 0);
    EXPECT_EQ(driver.results[again].usage.cached_prompt_tokens, 16);  // 4 full blocks; the last token is computed
    EXPECT_EQ(driver.results[different].usage.cached_prompt_tokens, 0);
    EXPECT_EQ(core.stats().prefix_hit_tokens, 16);
    EXPECT_EQ(driver.results[again].choices[0].tokens, driver.results[first].choices[0].tokens);
    EXPECT_EQ(driver.results[first].choices[0].tokens, runner_greedy(r));
    EXPECT_EQ(driver.results[different].choices[0].tokens, runner_greedy(other));
}

TEST(EngineImages, PartlyCachedImageRunsToItsEnd) {
    // The second prompt is the first's leading 16 tokens, ending on the image's last row (4..15):
    // the cache serves 3 blocks (positions 0..11, inside the image) and the image's other rows run
    // in one step, attending to the cached ones.
    auto inner = open_model();
    RecordingModel model(*inner);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 12, .max_seqs = 2, .max_image_tokens = 12};
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    const Request longer = image_request({image(4, 12, 21)}, 18, 0, 3);
    driver.add(longer);
    driver.run();
    model.steps.clear();
    Request r = longer;
    r.prompt.resize(16);
    const RequestId id = driver.add(r);
    driver.run();
    EXPECT_EQ(driver.results[id].usage.cached_prompt_tokens, 12);
    EXPECT_EQ(driver.results[id].choices[0].tokens, runner_greedy(r));
    expect_images_whole(model.steps, 4);
}

TEST(EngineImages, NChoicesShareTheImage) {
    auto model = open_model();
    EngineCore core(*model, nullptr, {});
    Driver driver(core);
    Request r = image_request({image(2, 8, 31)}, 14, 5, 6);
    r.n = 3;
    const RequestId id = driver.add(r);
    driver.run();
    const auto want = runner_greedy(r);
    ASSERT_EQ(driver.results[id].choices.size(), 3u);
    for (const auto& [index, c] : driver.results[id].choices) EXPECT_EQ(c.tokens, want) << "choice " << index;
}

// Prompt lookup drafts from the prompt's tokens (the image's placeholder ids among them); the
// verified output is the plain greedy one.
TEST(EngineImages, SpeculativeDecodingKeepsTheGreedyTokens) {
    auto model = open_model();
    test::expect_drafts_keep_greedy(*model, image_request({image(3, 8, 41)}, 16, 2, 24), runner_greedy);
}

TEST(EngineImages, RefusalsNameTheProblem) {
    auto model = open_model();
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = 4, .max_image_tokens = 8};
    EngineCore core(*model, nullptr, options);
    auto refused = [&](const Request& r, const std::string& want) { test::expect_refused(core, r, want); };
    refused(image_request({image(2, 9, 1)}, 20, 0, 2), "an image of 9 tokens is more than the 8 image tokens one step");
    refused(image_request({image(15, 8, 1)}, 20, 0, 2), "outside the prompt of 20 tokens");
    refused(image_request({image(2, 6, 1), image(6, 4, 2)}, 20, 0, 2), "overlaps");
    Request wrong = image_request({image(2, 6, 1)}, 20, 0, 2);
    wrong.images[0].embeddings.pop_back();
    refused(wrong, "image 0 has 287 embedding values, not 6 rows of the model's width 48");
    Request embed = image_request({image(2, 6, 1)}, 20, 0, 2);
    embed.embedding = EmbeddingSpec{};
    refused(embed, "an embedding request takes no images");
    EXPECT_NO_THROW(core.validate(image_request({image(2, 8, 1)}, 20, 0, 2)));

    test::FakeStepModel fake(kVocab, 16, 4);
    EngineCore text_only(fake, nullptr, {});
    try {
        text_only.validate(image_request({image(2, 4, 1)}, 10, 0, 2));
        ADD_FAILURE() << "a text-only model took an image";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("takes no images"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::engine
