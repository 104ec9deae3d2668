// Qwen3-VL images through SequenceRunner (model/sequence_runner.h, ImageSpan with a grid): the rows'
// M-RoPE positions equal transformers' layout (a hand-built batch with vision::qwen3vl_rope_
// positions gives the same logits), decode continues from the right rotary position, a repeated
// image is served by the prefix cache (another image is not), and greedy text with two images is
// the same whatever the prefill chunk.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "vision/qwen3vl_layout.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4, kPad = 319;
constexpr int64_t kDim = 64, kWidth = 3 * kDim;  // 3 layers: 2 deep-stack slices

std::shared_ptr<const gguf::File> file() {
    static std::shared_ptr<const gguf::File> f = [] {
        RandomModelSpec s;
        s.arch = "qwen3vl"; s.n_layers = 3; s.dim = kDim; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96;
        s.vocab_size = 320; s.image_tokens = true; s.rope_theta = 1e5f; s.seed = 9;
        const std::string path = test::temp_path("qwen3vl_runner.gguf");
        write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return f;
}

std::unique_ptr<StepModel> open() {
    return open_step_model(file(), {.backend = "cpu", .threads = 2,
                                    .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256});
}

ImageSpan image(int64_t begin, int64_t gh, int64_t gw, double seed) {
    ImageSpan s{.begin = begin, .rows = gh * gw, .hash = uint64_t(seed * 1000), .grid_h = gh, .grid_w = gw};
    s.embeddings.resize(size_t(s.rows * kWidth));
    for (size_t i = 0; i < s.embeddings.size(); ++i) s.embeddings[i] = float(std::sin(double(i) * 0.23 + seed));
    return s;
}

// text 0..2, a 2 x 3 image at 3..8, text 9..10, a 1 x 2 image at 11..12, text 13..15.
std::vector<int32_t> prompt() {
    std::vector<int32_t> p;
    for (int32_t i = 0; i < 16; ++i) p.push_back((i >= 3 && i < 9) || (i >= 11 && i < 13) ? kPad : (i * 31 + 5) % 300);
    return p;
}

TEST(Qwen3VlRunner, RowsGetTransformersRotaryLayout) {
    auto model = open();
    SequenceRunner runner(*model, false);
    const std::vector<ImageSpan> images = {image(3, 2, 3, 1), image(11, 1, 2, 2)};
    runner.set_images(0, images);
    const auto p = prompt();
    const std::vector<float> got = runner.prefill(0, p, 512, true);
    // The same rows by hand, positions from the layout function.
    const vision::ImagePlacement places[2] = {{.first = 3, .grid_h = 2, .grid_w = 3}, {.first = 11, .grid_h = 1, .grid_w = 2}};
    const std::vector<int32_t> rope = vision::qwen3vl_rope_positions(16, places);
    auto direct = open();
    Batch b;
    const int32_t s = b.add_sequence({0, 1, 2, 3});
    for (int32_t i = 0; i < 16; ++i) {
        b.add(p[size_t(i)], i, s, i, true);
        for (const ImageSpan& im : images)
            if (i >= im.begin && i < im.begin + im.rows)
                b.set_last_row_embedding(std::span(im.embeddings).subspan(size_t((i - im.begin) * kWidth), size_t(kWidth)), i);
        b.set_rope_position(rope[size_t(3 * i)], rope[size_t(3 * i + 1)], rope[size_t(3 * i + 2)]);
    }
    EXPECT_EQ(got, direct->forward(b));
    // A decoded token at position 16 continues at rotary position 16 - (6 - 3) - (2 - 2) = 13.
    const std::vector<float> next = runner.decode(0, 7);
    b.clear();
    const int32_t s2 = b.add_sequence({0, 1, 2, 3, 4});
    b.add(7, 16, s2, 16, true);
    b.set_rope_position(13, 13, 13);
    EXPECT_EQ(next, direct->forward(b));
}

TEST(Qwen3VlRunner, RepeatedImageHitsThePrefixCache) {
    auto model = open();
    SequenceRunner runner(*model, true);
    const auto p = prompt();
    runner.set_images(0, {image(3, 2, 3, 1), image(11, 1, 2, 2)});
    const auto first = runner.prefill(0, p);
    EXPECT_EQ(runner.last_cached_tokens(), 0);
    runner.set_images(1, {image(3, 2, 3, 1), image(11, 1, 2, 2)});
    const auto again = runner.prefill(1, p);
    EXPECT_EQ(runner.last_cached_tokens(), 12);  // three full blocks; the last block holds the last token
    EXPECT_EQ(again, first);
    runner.set_images(2, {image(3, 2, 3, 5), image(11, 1, 2, 2)});  // another first picture
    runner.prefill(2, p);
    EXPECT_EQ(runner.last_cached_tokens(), 0);
}

TEST(Qwen3VlRunner, GreedyTextIsTheSameForEveryChunk) {
    auto greedy = [](int64_t chunk) {
        auto model = open();
        SequenceRunner runner(*model, false);
        runner.set_images(0, {image(3, 2, 3, 1), image(11, 1, 2, 2)});
        std::vector<float> logits = runner.prefill(0, prompt(), chunk);
        std::vector<int32_t> out;
        for (int i = 0; i < 6; ++i) {
            const auto best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
            out.push_back(best);
            logits = runner.decode(0, best);
        }
        return out;
    };
    const auto whole = greedy(512);
    EXPECT_EQ(greedy(4), whole);  // chunks end before an image or after it, never inside
    EXPECT_EQ(greedy(2), whole);
}

TEST(Qwen3VlRunner, MisshapenImagesAreRefused) {
    auto model = open();
    SequenceRunner runner(*model, false);
    ImageSpan bad = image(3, 2, 3, 1);
    bad.grid_w = 2;
    runner.set_images(0, {bad});
    try {
        runner.prefill(0, prompt());
        FAIL() << "expected a refusal";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "an image of 6 rows is not a grid of 2 x 2 tokens");
    }
}

}  // namespace
}  // namespace pagoda::model
