// qwen3vl (model/arch/qwen3vl.cpp) on gen-model's random model: IMROPE's pair axes against the
// rule written out, the backends' multi-axis RoPE against the rotation equations, the logits of a
// prompt with an image (M-RoPE positions, deep-stack slices) on CPU against the reference backend,
// batch invariance, and that positions and deep-stack slices reach the logits; malformed batches
// are refused.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/qwen3vl_rope.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "vision/qwen3vl_layout.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4;
constexpr int64_t kDim = 64, kSlices = 3;  // 3 layers: 2 deep-stack slices

std::shared_ptr<const gguf::File> qwen3vl_file() {
    static std::shared_ptr<const gguf::File> file = [] {
        RandomModelSpec s;
        s.arch = "qwen3vl"; s.n_layers = 3; s.dim = kDim; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96;
        s.vocab_size = 320; s.image_tokens = true; s.rope_theta = 1e5f; s.seed = 5;
        const std::string path = test::temp_path("qwen3vl_model.gguf");
        write_random_model(s, nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return file;
}

std::unique_ptr<StepModel> open(const std::string& backend) {
    return open_step_model(qwen3vl_file(), {.backend = backend, .threads = 2,
                                            .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 128});
}

TEST(Qwen3VlRope, PairAxesFollowTheInterleavedRule) {
    // sections [4, 2, 2] over 8 pairs: h at 1, 4 (s % 3 == 1, s < 6), w at 2, 5, the rest temporal.
    EXPECT_EQ(imrope_pair_axes({4, 2, 2, 0}, 8), (std::vector<uint8_t>{0, 1, 2, 0, 1, 2, 0, 0}));
    // Qwen3-VL's [24, 20, 20] over 64 pairs: h and w stop at pair 60; 61 and 62 fall back to temporal.
    const auto axes = imrope_pair_axes({24, 20, 20, 0}, 64);
    for (int p = 0; p < 64; ++p) {
        const int want = (p % 3 == 1 && p < 60) ? 1 : (p % 3 == 2 && p < 60) ? 2 : 0;
        EXPECT_EQ(axes[size_t(p)], want) << p;
    }
    EXPECT_THROW(imrope_pair_axes({0, 0, 0}, 8), Error);
    EXPECT_THROW(imrope_pair_axes({1, 2, 3, 4, 5}, 8), Error);
}

// NEOX rotation of pair i by pos[axis_i] * inv_freq[i], written out, against each backend's rope op.
TEST(Qwen3VlRope, BackendsRotateEachPairByItsAxisPosition) {
    constexpr int64_t hd = 16, half = 8, n = 2;
    backend::RopeSpec spec{.dims = hd, .neox = true};
    for (int64_t i = 0; i < half; ++i) spec.inv_freq.push_back(std::pow(1000.0, -double(i) / double(half)));
    spec.pair_axis = imrope_pair_axes({4, 2, 2}, half);
    const std::vector<int32_t> positions = {3, 9}, axes = {3, 5, 7, 9, 1, 12};
    std::vector<float> x(size_t(n * hd));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::cos(double(i) * 0.7) + 0.1 * double(i));
    std::vector<float> want = x;
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < half; ++i) {
            const double angle = double(axes[size_t(t * 3 + spec.pair_axis[size_t(i)])]) * spec.inv_freq[size_t(i)];
            const double a = x[size_t(t * hd + i)], b = x[size_t(t * hd + i + half)];
            want[size_t(t * hd + i)] = float(a * std::cos(angle) - b * std::sin(angle));
            want[size_t(t * hd + i + half)] = float(a * std::sin(angle) + b * std::cos(angle));
        }
    for (const char* name : {"cpu", "reference"}) {
        auto b = backend::make_backend(name);
        const auto rope = b->upload_rope(spec);
        b->reserve_activations(size_t(n * hd) * b->activation_size(), n);
        const backend::Tensor t{b->activations(), n, hd};
        b->write(t, x.data());
        const std::vector<int32_t> tokens = {0, 0}, seq = {0, 0}, none;
        const std::vector<int64_t> slots = {0, 1};
        const std::vector<std::vector<int32_t>> tables = {{0}};
        backend::StepInputs in{.tokens = tokens, .positions = positions, .seq_index = seq, .slots = slots,
                               .logit_rows = none, .block_tables = tables, .hidden_rows = none};
        in.rope_positions = axes;
        b->begin_step(in);
        b->rope(t, *rope, 1, int32_t(hd));
        std::vector<float> got(x.size());
        b->read(t, got.data());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << name << " " << i;
    }
    auto b = backend::make_backend("cpu");
    backend::RopeSpec bad = spec;
    bad.pair_axis[3] = 3;
    try {
        b->upload_rope(bad);
        FAIL() << "expected a refusal";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "cpu backend: RoPE pair 3 reads position axis 3, expected below 3");
    }
}

// One sequence: text 0..2, a 2 x 3 image at rows 3..8, text 9..11.
constexpr int32_t kImageFirst = 3, kLength = 12;
const vision::ImagePlacement kImage{.first = kImageFirst, .grid_h = 2, .grid_w = 3};

std::vector<float> image_rows(double seed) {
    std::vector<float> e(size_t(6 * kDim * kSlices));
    for (size_t i = 0; i < e.size(); ++i) e[i] = float(std::sin(double(i) * 0.31 + seed));
    return e;
}

void add_sequence(Batch& b, int32_t first_block, const std::vector<float>& image, bool mrope, int32_t salt = 0) {
    const int32_t s = b.add_sequence({first_block, first_block + 1, first_block + 2});
    const std::vector<int32_t> rope = vision::qwen3vl_rope_positions(kLength, std::span(&kImage, 1));
    const int32_t pad = 319;  // <|image_pad|> in the synthetic vocabulary (its embedding is never read)
    for (int32_t p = 0; p < kLength; ++p) {
        const bool in_image = p >= kImageFirst && p < kImageFirst + 6;
        b.add(in_image ? pad : (p * 29 + 7 + salt) % 300, p, s, int64_t(first_block) * kBlock + p, true);
        if (in_image)
            b.set_last_row_embedding(std::span(image).subspan(size_t((p - kImageFirst) * kDim * kSlices),
                                                              size_t(kDim * kSlices)), p);
        if (mrope) b.set_rope_position(rope[size_t(3 * p)], rope[size_t(3 * p + 1)], rope[size_t(3 * p + 2)]);
    }
}

std::vector<float> logits(StepModel& m, const std::vector<float>& image, bool mrope = true) {
    Batch b;
    add_sequence(b, 0, image, mrope);
    return m.forward(b);
}

double relative(const std::vector<float>& a, const std::vector<float>& b) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    return err / scale;
}

TEST(Qwen3VlModel, CpuMatchesReferenceWithAnImage) {
    auto cpu = open("cpu"), ref = open("reference");
    EXPECT_TRUE(cpu->info().image_input);
    const auto image = image_rows(1);
    const auto a = logits(*cpu, image), b = logits(*ref, image);
    ASSERT_EQ(a.size(), size_t(kLength * 320));
    EXPECT_LT(relative(a, b), 2e-4);
}

TEST(Qwen3VlModel, PositionsAndDeepStackSlicesReachTheLogits) {
    auto cpu = open("cpu");
    const auto image = image_rows(2);
    const auto base = logits(*cpu, image);
    // Plain positions for every row instead of the image's M-RoPE ones: other logits.
    EXPECT_GT(relative(logits(*cpu, image, false), base), 1e-4);
    // A deep-stack slice of the last image row changed: the rows from there on change, the earlier not.
    auto changed = image;
    for (int64_t i = 0; i < kDim; ++i) changed[size_t(5 * kDim * kSlices + 2 * kDim + i)] += 1.0f;
    const auto other = logits(*cpu, changed);
    const size_t row = 320, last_image_row = size_t(kImageFirst + 5);
    EXPECT_EQ(std::vector<float>(other.begin(), other.begin() + long(last_image_row * row)),
              std::vector<float>(base.begin(), base.begin() + long(last_image_row * row)));
    EXPECT_NE(std::vector<float>(other.begin() + long(last_image_row * row), other.end()),
              std::vector<float>(base.begin() + long(last_image_row * row), base.end()));
}

TEST(Qwen3VlModel, TextRowsWithEqualAxesMatchPlainRope) {
    // A text-only prompt: (p, p, p) rotary positions give bitwise the logits of no rotary positions.
    auto cpu = open("cpu");
    Batch a, b;
    const int32_t sa = a.add_sequence({0, 1}), sb = b.add_sequence({0, 1});
    for (int32_t p = 0; p < 8; ++p) {
        a.add((p * 13 + 5) % 300, p, sa, p, true);
        b.add((p * 13 + 5) % 300, p, sb, p, true);
        b.set_rope_position(p, p, p);
    }
    EXPECT_EQ(cpu->forward(a), cpu->forward(b));
}

TEST(Qwen3VlModel, GreedyLogitsWithAnImageAreBatchInvariant) {
    auto cpu = open("cpu");
    const auto image = image_rows(3);
    const auto alone = logits(*cpu, image);
    // The same sequence beside another one (text and its own image), placed second in the batch.
    Batch b;
    add_sequence(b, 0, image_rows(9), true, 17);
    add_sequence(b, 3, image, true);
    const auto both = cpu->forward(b);
    ASSERT_EQ(both.size(), 2 * alone.size());
    EXPECT_EQ(std::vector<float>(both.begin() + long(alone.size()), both.end()), alone);
}

TEST(Qwen3VlModel, MalformedBatchesAreRefused) {
    auto cpu = open("cpu");
    Batch b;
    add_sequence(b, 0, image_rows(1), true);
    b.rope_positions.pop_back();
    try {
        cpu->forward(b);
        FAIL() << "expected a refusal";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "malformed batch: 35 rotary positions for 12 tokens (3 each)");
    }
    Batch narrow;
    const int32_t s = narrow.add_sequence({0});
    narrow.add(5, 0, s, 0, true);
    const std::vector<float> row(size_t(kDim), 0.5f);
    narrow.set_last_row_embedding(row, 0);
    try {
        cpu->forward(narrow);
        FAIL() << "expected a refusal";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "malformed batch: 64 embedding floats for 1 rows of 192");
    }
}

}  // namespace
}  // namespace pagoda::model
