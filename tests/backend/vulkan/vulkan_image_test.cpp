// Image rows on the Vulkan backend (StepInputs::attend_until, Gemma 3 vision): a random Gemma 3 with
// an 8-row image between text, its rows given embeddings that attend up to the image's end, against
// the reference backend (logits within 1e-5 of the largest, the same greedy token at every row), the
// image's rows really bidirectional (they differ from a causal run), and batch invariance: the
// sequence's logits bitwise the same alone, beside another sequence with an image, and in chunks.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4, kVocab = 300;
constexpr int64_t kDim = 48;
constexpr int32_t kImageBegin = 4, kImageRows = 8, kLength = 16;  // text 0..3, image 4..11, text 12..15

std::shared_ptr<const gguf::File> gemma3_file() {
    static std::shared_ptr<const gguf::File> file = [] {
        RandomModelSpec s;
        s.arch = "gemma3"; s.n_layers = 2; s.dim = kDim; s.n_heads = 6; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 72;
        s.vocab_size = kVocab; s.sliding_window = 14; s.swa_period = 2; s.rope_theta = 1e6f; s.seed = 23;
        const std::string path = test::temp_path("vulkan_image_gemma3.gguf");
        write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return file;
}

std::unique_ptr<StepModel> open(const std::string& backend) {
    return open_step_model(gemma3_file(), {.backend = backend, .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32},
                                           .tokens_wanted = 128});
}

std::vector<float> image_embeddings(uint64_t seed) {
    std::vector<float> e(size_t(kImageRows * kDim));
    for (size_t i = 0; i < e.size(); ++i) e[i] = float(std::sin(double(i) * 0.41 + double(seed))) * 2.0f;
    return e;
}

std::vector<int32_t> blocks(int32_t first) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < kLength / kBlock; ++i) t.push_back(first + i);
    return t;
}

// Positions [from, to) of a sequence whose blocks start at `first_block`, every row wanting logits.
void add_rows(Batch& b, int32_t seq, int32_t first_block, int32_t from, int32_t to, const std::vector<float>& image,
              bool bidirectional, int32_t salt = 0) {
    for (int32_t p = from; p < to; ++p) {
        const bool in_image = p >= kImageBegin && p < kImageBegin + kImageRows;
        b.add(in_image ? 7 : (p * 37 + 11 + salt) % kVocab, p, seq, int64_t(first_block) * kBlock + p, true);
        if (in_image)
            b.set_last_row_embedding(std::span(image).subspan(size_t((p - kImageBegin) * kDim), size_t(kDim)),
                                     bidirectional ? kImageBegin + kImageRows - 1 : p);
    }
}

std::vector<float> run_whole(const std::string& backend, const std::vector<float>& image, bool bidirectional) {
    auto model = open(backend);
    Batch b;
    add_rows(b, b.add_sequence(blocks(0)), 0, 0, kLength, image, bidirectional);
    return model->forward(b);
}

int32_t argmax(const float* v) { return int32_t(std::max_element(v, v + kVocab) - v); }

TEST(VulkanImageRows, MatchTheReference) {
    PAGODA_REQUIRE_VULKAN();
    const auto image = image_embeddings(1);
    const auto got = run_whole("vulkan", image, true);
    const auto want = run_whole("reference", image, true);
    ASSERT_EQ(got.size(), size_t(kLength * kVocab));
    ASSERT_EQ(want.size(), got.size());
    double scale = 0;
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << "row " << i / kVocab;
    for (int32_t r = 0; r < kLength; ++r)
        EXPECT_EQ(argmax(got.data() + r * kVocab), argmax(want.data() + r * kVocab)) << "greedy token of row " << r;
    // The image's rows (all but its last) see later image rows: a causal run differs there.
    const auto causal = run_whole("vulkan", image, false);
    for (int32_t r = kImageBegin; r < kImageBegin + kImageRows - 1; ++r)
        EXPECT_FALSE(std::equal(got.begin() + r * kVocab, got.begin() + (r + 1) * kVocab, causal.begin() + r * kVocab))
            << "image row " << r << " is causal";
}

TEST(VulkanImageRows, BatchInvariant) {
    PAGODA_REQUIRE_VULKAN();
    const auto image = image_embeddings(2);
    const auto alone = run_whole("vulkan", image, true);
    auto model = open("vulkan");
    Batch b;
    add_rows(b, b.add_sequence(blocks(0)), 0, 0, kLength, image_embeddings(9), true, 5);
    add_rows(b, b.add_sequence(blocks(kLength / kBlock)), kLength / kBlock, 0, kLength, image, true);
    const auto together = model->forward(b);
    ASSERT_EQ(together.size(), 2 * alone.size());
    for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(together[alone.size() + i], alone[i]) << "row " << i / kVocab;
    // In chunks: the text, the whole image, then one token a step.
    auto chunked = open("vulkan");
    std::vector<float> logits;
    auto step = [&](int32_t from, int32_t to) {
        Batch c;
        add_rows(c, c.add_sequence(blocks(0)), 0, from, to, image, true);
        const auto l = chunked->forward(c);
        logits.insert(logits.end(), l.begin(), l.end());
    };
    step(0, kImageBegin);
    step(kImageBegin, kImageBegin + kImageRows);
    for (int32_t p = kImageBegin + kImageRows; p < kLength; ++p) step(p, p + 1);
    ASSERT_EQ(logits.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(logits[i], alone[i]) << "row " << i / kVocab;
}

}  // namespace
}  // namespace pagoda::model
