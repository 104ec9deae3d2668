// Qwen3-VL's text model on the Vulkan backend: a random qwen3vl (gen-model's writer: interleaved
// M-RoPE sections, 2 deep-stack slices) with two images of different grids placed by SequenceRunner
// (the M-RoPE positions of model/mrope_position.h, each image row's embedding and deep-stack slices),
// against the reference backend within the Vulkan model tests' tolerance (1e-5 of the largest
// logit) for the prefill's every row and for greedy decode steps after the images (whose rotary
// positions fall behind their KV positions); the same greedy tokens. The fusion pass off gives
// bitwise the same logits (qkv_rope_kv_write reads the M-RoPE table the unfused rope does), and so
// do a prefill in chunks (padded decode buckets included) and the prompt beside another one with
// its own images in one batch (batch invariance); a partial offload (-ngl 1) agrees with the
// reference too. The image rows' embeddings and deep-stack slices cross to the device an image at a
// time, not a row at a time (the prefill step's submissions do not grow with the image's rows).
// On lavapipe under the validation layer.
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

#ifdef PAGODA_HAVE_VULKAN  // the stream counters exist only where the backend is built
#include "backend/vulkan/vk_context.h"
#endif
#include "backend/vulkan/vulkan_test_env.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/mrope_position.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4, kVocab = 320, kPad = 319, kDecode = 6;
constexpr int64_t kDim = 64, kLayers = 3;

std::shared_ptr<const gguf::File> qwen3vl_file() {
    static std::shared_ptr<const gguf::File> file = [] {
        RandomModelSpec s;
        s.arch = "qwen3vl"; s.n_layers = kLayers; s.dim = kDim; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 32;
        s.ffn_dim = 96; s.vocab_size = kVocab; s.image_tokens = true; s.rope_theta = 1e4f; s.seed = 41;
        const std::string path = test::temp_path("vulkan_qwen3vl.gguf");
        write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return file;
}

std::unique_ptr<StepModel> open(const std::string& backend, bool fusion = true, int32_t gpu_layers = -1) {
    return open_step_model(qwen3vl_file(), {.backend = backend, .threads = 1, .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32},
                                            .tokens_wanted = 128, .fusion = fusion, .n_gpu_layers = gpu_layers});
}

// Text 0..2, a 3 x 2 image at 3..8, text 9..11, a 2 x 4 image at 12..19, text 20..22.
struct Prompt {
    std::vector<int32_t> tokens;
    std::vector<ImageSpan> images;
};

Prompt prompt(int64_t second_h = 2, int64_t second_w = 4) {
    const int64_t width = kDim * (1 + qwen3vl_deepstack_layers(kLayers));
    Prompt p;
    auto image = [&](int64_t h, int64_t w, double seed) {
        ImageSpan span{.begin = int64_t(p.tokens.size()), .rows = h * w, .hash = uint64_t(seed * 1000), .grid_h = h, .grid_w = w};
        span.embeddings.resize(size_t(span.rows * width));
        for (size_t i = 0; i < span.embeddings.size(); ++i) span.embeddings[i] = float(std::sin(double(i) * 0.37 + seed));
        p.tokens.insert(p.tokens.end(), size_t(span.rows), kPad);
        p.images.push_back(std::move(span));
    };
    auto text = [&](int32_t n) {
        for (int32_t i = 0; i < n; ++i) p.tokens.push_back(int32_t((p.tokens.size() * 29 + 7) % 300));
    };
    text(3);
    image(3, 2, 1.0);
    text(3);
    image(second_h, second_w, 2.0);
    text(3);
    return p;
}

// The prefill's logits (one step) and the host waits it took.
std::pair<std::vector<float>, uint64_t> prefill_submissions(StepModel& model, const Prompt& p) {
    SequenceRunner runner(model);
    runner.set_images(0, p.images);
#ifdef PAGODA_HAVE_VULKAN
    const uint64_t before = backend::vulkan::Stream::submissions();
    auto logits = runner.prefill(0, p.tokens);
    return {std::move(logits), backend::vulkan::Stream::submissions() - before};
#else
    return {runner.prefill(0, p.tokens), 0};
#endif
}

// Every prefill row's logits, then kDecode decode steps' logits; the decoded tokens are `tokens`
// (given: each backend decodes the same ones) or, when empty, each step's greedy token, stored there.
std::vector<float> run(StepModel& model, std::vector<int32_t>& tokens, int64_t chunk = 512) {
    SequenceRunner runner(model);
    const Prompt p = prompt();
    runner.set_images(0, p.images);
    std::vector<float> all = runner.prefill(0, p.tokens, chunk, true);
    const bool greedy = tokens.empty();
    for (int i = 0; i < kDecode; ++i) {
        const float* last = all.data() + all.size() - kVocab;
        if (greedy) tokens.push_back(int32_t(std::max_element(last, last + kVocab) - last));
        const auto step = runner.decode(0, tokens[size_t(i)]);
        all.insert(all.end(), step.begin(), step.end());
    }
    return all;
}

int32_t argmax(const float* v) { return int32_t(std::max_element(v, v + kVocab) - v); }

TEST(VulkanQwen3Vl, ImagesAndDecodeMatchTheReference) {
    PAGODA_REQUIRE_VULKAN();
    std::vector<int32_t> tokens;
    auto ref = open("reference");
    const auto want = run(*ref, tokens);
    auto vk = open("vulkan");
    EXPECT_TRUE(vk->info().mrope);
    const auto got = run(*vk, tokens);
    const size_t rows = prompt().tokens.size() + kDecode;
    ASSERT_EQ(want.size(), rows * kVocab);
    ASSERT_EQ(got.size(), want.size());
    double scale = 0;
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << "row " << i / kVocab;
    for (size_t r = 0; r < rows; ++r)
        EXPECT_EQ(argmax(got.data() + r * kVocab), argmax(want.data() + r * kVocab)) << "greedy token of row " << r;
}

TEST(VulkanQwen3Vl, UnfusedAndChunkedAreBitwiseTheSame) {
    PAGODA_REQUIRE_VULKAN();
    std::vector<int32_t> tokens;
    auto vk = open("vulkan");
    const auto whole = run(*vk, tokens);
    auto unfused = open("vulkan", false);
    EXPECT_EQ(run(*unfused, tokens), whole) << "fusion off";
    // Chunks of 4 (an image runs whole in its step): 3 text rows, the 6-row image, ... each computed
    // alone, the short ones in padded buckets.
    auto chunked = open("vulkan");
    EXPECT_EQ(run(*chunked, tokens, 4), whole) << "prefill in chunks of 4";
}

// Prompt `p` as a sequence whose blocks start at `first_block`, every row wanting logits, its image
// rows given their embeddings and every row its M-RoPE position (as SequenceRunner lays them out).
void add_prompt(Batch& b, const Prompt& p, int32_t first_block) {
    std::vector<int32_t> table;
    for (int32_t i = 0; i * kBlock < int32_t(p.tokens.size()); ++i) table.push_back(first_block + i);
    const int32_t s = b.add_sequence(table);
    for (int32_t pos = 0; pos < int32_t(p.tokens.size()); ++pos) {
        b.add(p.tokens[size_t(pos)], pos, s, int64_t(first_block) * kBlock + pos, true);
        for (const ImageSpan& im : p.images)
            if (pos >= im.begin && pos < im.begin + im.rows) {
                const size_t width = im.embeddings.size() / size_t(im.rows);
                b.set_last_row_embedding(std::span(im.embeddings).subspan(size_t(pos - im.begin) * width, width), pos);
            }
        const auto [t, h, w] = mrope_position(pos, std::span<const ImageSpan>(p.images));
        b.set_rope_position(t, h, w);
    }
}

TEST(VulkanQwen3Vl, LogitsWithImagesAreBatchInvariant) {
    PAGODA_REQUIRE_VULKAN();
    auto vk = open("vulkan");
    Batch alone;
    add_prompt(alone, prompt(), 0);
    const auto want = vk->forward(alone);
    // After a 63-token prompt with a 6 x 8 image in the same step (GEMM rows, not the 23 alone).
    Batch both;
    add_prompt(both, prompt(6, 8), 0);
    add_prompt(both, prompt(), 16);
    const auto got = vk->forward(both);
    ASSERT_EQ(got.size(), size_t(63 * kVocab) + want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.end() - long(want.size())));
}

TEST(VulkanQwen3Vl, ImageRowsCrossATensorAtATime) {
    PAGODA_REQUIRE_VULKAN();
    auto vk = open("vulkan");
    const auto [small_logits, small] = prefill_submissions(*vk, prompt());
    const auto [large_logits, large] = prefill_submissions(*vk, prompt(6, 8));  // 48 image rows in place of 8
    EXPECT_EQ(large_logits.size(), size_t(kVocab));
    EXPECT_EQ(small, large) << "host waits of a prefill with 14 and with 54 image rows";
    // At most, per node that takes given rows (slice 0 and 2 deep-stack slices), a read and two
    // waits a write per image; then the step's logits (row by row it was 72 and 272).
    EXPECT_LE(small, 3u * (1 + 2 * 2) + 1);
}

TEST(VulkanQwen3Vl, PartialOffloadMatchesTheReference) {
    PAGODA_REQUIRE_VULKAN();
    std::vector<int32_t> tokens;
    auto ref = open("reference");
    const auto want = run(*ref, tokens);
    auto split = open("vulkan", true, 1);  // layer 0 on the device, the deep-stack layers 1 and 2 on the CPU
    EXPECT_EQ(split->info().backend, "vulkan:1+cpu");
    const auto got = run(*split, tokens);
    ASSERT_EQ(got.size(), want.size());
    double scale = 0;
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << "row " << i / kVocab;
}

}  // namespace
}  // namespace pagoda::model
