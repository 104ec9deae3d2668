// Rows that take a given embedding (an image's soft tokens) and attend bidirectionally within their
// image (model/batch.h), on a random Gemma 3: the CPU backend against the reference backend, batch
// invariance, a given embedding equal to a token's scaled embedding reproducing that token (so no
// sqrt(dim) scale applies to given rows), causal vs bidirectional spans, images past and longer than
// the sliding window, and the refusals.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4;
constexpr int64_t kDim = 48;

RandomModelSpec gemma3_spec() {
    RandomModelSpec s;
    s.arch = "gemma3"; s.n_layers = 2; s.dim = kDim; s.n_heads = 6; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 72;
    s.vocab_size = 300; s.sliding_window = 24; s.swa_period = 2; s.rope_theta = 1e6f; s.seed = 21;
    return s;
}

std::shared_ptr<const gguf::File> gemma3_file() {
    static std::shared_ptr<const gguf::File> file = [] {
        const std::string path = test::temp_path("image_rows_gemma3.gguf");
        write_random_model(gemma3_spec(), nullptr, path);
        return std::shared_ptr<const gguf::File>(gguf::File::open(path));
    }();
    return file;
}

std::unique_ptr<StepModel> open(const std::string& backend) {
    return open_step_model(gemma3_file(), {.backend = backend, .threads = 2,
                                           .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 128});
}

// One sequence: text 0..3, an image of 8 rows at 4..11, text 12..15.
constexpr int32_t kImageBegin = 4, kImageRows = 8, kLength = 16;

std::vector<float> image_embeddings(uint64_t seed) {
    std::vector<float> e(size_t(kImageRows * kDim));
    for (size_t i = 0; i < e.size(); ++i) e[i] = float(std::sin(double(i) * 0.37 + double(seed))) * 2.0f;
    return e;
}

int32_t text_token(int32_t pos, int32_t salt) { return (pos * 37 + 11 + salt) % 300; }

// Adds positions [from, to) of a sequence whose blocks start at `first_block`.
void add_rows(Batch& b, int32_t seq, int32_t first_block, int32_t from, int32_t to, const std::vector<float>& image,
              bool bidirectional, int32_t salt = 0) {
    for (int32_t p = from; p < to; ++p) {
        const int64_t slot = int64_t(first_block) * kBlock + p;  // blocks are consecutive
        const bool in_image = p >= kImageBegin && p < kImageBegin + kImageRows;
        b.add(in_image ? 7 : text_token(p, salt), p, seq, slot, true);
        if (in_image)
            b.set_last_row_embedding(std::span(image).subspan(size_t((p - kImageBegin) * kDim), size_t(kDim)),
                                     bidirectional ? kImageBegin + kImageRows - 1 : p);
    }
}

std::vector<int32_t> blocks(int32_t first, int32_t n) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
    return t;
}

// Logits of the one sequence in one step, on `backend`.
std::vector<float> run_whole(const std::string& backend, const std::vector<float>& image, bool bidirectional) {
    auto model = open(backend);
    Batch b;
    const int32_t s = b.add_sequence(blocks(0, kLength / kBlock));
    add_rows(b, s, 0, 0, kLength, image, bidirectional);
    return model->forward(b);
}

double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::abs(x)));
    return m;
}

TEST(ImageRows, CpuMatchesReference) {
    const auto image = image_embeddings(1);
    const auto cpu = run_whole("cpu", image, true);
    const auto ref = run_whole("reference", image, true);
    ASSERT_EQ(cpu.size(), ref.size());
    ASSERT_EQ(cpu.size(), size_t(kLength * 300));
    const double tol = 1e-5 * max_abs(ref);
    for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(cpu[i], ref[i], tol) << "row " << i / 300;
}

TEST(ImageRows, BatchInvariant) {
    const auto image = image_embeddings(2);
    const auto alone = run_whole("cpu", image, true);
    // The same sequence after another one (with an image of its own) in one step, then in chunks:
    // text, the whole image, then the rest one token a step.
    auto model = open("cpu");
    Batch b;
    const int32_t other = b.add_sequence(blocks(0, kLength / kBlock));
    add_rows(b, other, 0, 0, kLength, image_embeddings(9), true, 5);
    const int32_t s = b.add_sequence(blocks(kLength / kBlock, kLength / kBlock));
    add_rows(b, s, kLength / kBlock, 0, kLength, image, true);
    const auto together = model->forward(b);
    ASSERT_EQ(together.size(), size_t(2 * kLength * 300));
    for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(together[size_t(kLength * 300) + i], alone[i]) << "row " << i / 300;

    auto chunked = open("cpu");
    std::vector<float> logits;
    auto step = [&](int32_t from, int32_t to) {
        Batch c;
        const int32_t seq = c.add_sequence(blocks(0, kLength / kBlock));
        add_rows(c, seq, 0, from, to, image, true);
        const auto l = chunked->forward(c);
        logits.insert(logits.end(), l.begin(), l.end());
    };
    step(0, kImageBegin);
    step(kImageBegin, kImageBegin + kImageRows);
    for (int32_t p = kImageBegin + kImageRows; p < kLength; ++p) step(p, p + 1);
    ASSERT_EQ(logits.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(logits[i], alone[i]) << "row " << i / 300;
}

TEST(ImageRows, BidirectionalSpanDiffersFromCausal) {
    const auto image = image_embeddings(3);
    const auto bi = run_whole("reference", image, true);
    const auto causal = run_whole("reference", image, false);
    auto row = [](const std::vector<float>& v, int32_t r) {
        return std::vector<float>(v.begin() + r * 300, v.begin() + (r + 1) * 300);
    };
    for (int32_t r = 0; r < kImageBegin; ++r) EXPECT_EQ(row(bi, r), row(causal, r)) << "text before the image, row " << r;
    // Every image row but the last sees later image rows; the text after sees changed image K/V.
    for (int32_t r = kImageBegin; r < kImageBegin + kImageRows - 1; ++r) EXPECT_NE(row(bi, r), row(causal, r)) << "row " << r;
    for (int32_t r = kImageBegin + kImageRows; r < kLength; ++r) EXPECT_NE(row(bi, r), row(causal, r)) << "row " << r;
}

// A given embedding equal to token k's embedding times sqrt(dim) (what the graph makes of a token)
// gives token k's logits: given rows replace the scaled embedding and are not scaled themselves.
TEST(ImageRows, GivenEmbeddingTakesThePlaceOfTheScaledTokenEmbedding) {
    const gguf::TensorInfo* table = gemma3_file()->find_tensor("token_embd.weight");
    ASSERT_NE(table, nullptr);
    ASSERT_EQ(table->type, gguf::GgmlType::F32);
    const int32_t token = 42;
    std::vector<float> e(static_cast<size_t>(kDim));
    const auto* rows = reinterpret_cast<const float*>(table->data);
    for (int64_t i = 0; i < kDim; ++i) e[size_t(i)] = rows[token * kDim + i] * std::sqrt(float(kDim));

    for (const char* backend : {"cpu", "reference"}) {
        auto model = open(backend);
        Batch plain, given;
        int32_t s = plain.add_sequence({0});
        plain.add(3, 0, s, 0, false);
        plain.add(token, 1, s, 1, true);
        s = given.add_sequence({0});
        given.add(3, 0, s, 0, false);
        given.add(7, 1, s, 1, true);
        given.set_last_row_embedding(e, 1);
        const auto a = model->forward(plain);
        const auto b = model->forward(given);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * max_abs(a)) << backend << " logit " << i;
    }
}

// SequenceRunner: a chunk never splits an image (chunks of 3 give the one-step logits), a repeated
// image hits the prefix cache (and computes the same logits), another image with the same
// placeholder ids does not.
TEST(ImageRows, RunnerChunksAroundImagesAndCachesByImageHash) {
    auto model = open("cpu");
    std::vector<int32_t> prompt;
    for (int32_t p = 0; p < kLength; ++p)
        prompt.push_back(p >= kImageBegin && p < kImageBegin + kImageRows ? 7 : text_token(p, 0));
    const ImageSpan a{.begin = kImageBegin, .rows = kImageRows, .embeddings = image_embeddings(4), .hash = 0xA};
    ImageSpan b = a;
    b.embeddings = image_embeddings(5);
    b.hash = 0xB;
    const auto whole = run_whole("cpu", a.embeddings, true);

    SequenceRunner runner(*model, true);
    runner.set_images(0, {a});
    const auto chunked = runner.prefill(0, prompt, 3, true);
    EXPECT_EQ(runner.last_cached_tokens(), 0);
    ASSERT_EQ(chunked, whole);

    runner.set_images(1, {a});
    const auto again = runner.prefill(1, prompt, 512, true);
    EXPECT_EQ(runner.last_cached_tokens(), 12);  // three full blocks; the last token is always computed
    ASSERT_EQ(again.size(), size_t(4 * 300));
    EXPECT_TRUE(std::equal(again.begin(), again.end(), whole.begin() + 12 * 300));

    runner.set_images(2, {b});
    runner.prefill(2, prompt, 512, true);
    EXPECT_EQ(runner.last_cached_tokens(), 0) << "another image's blocks were served from the cache";

    ImageSpan outside = a;
    outside.begin = kLength - 2;
    runner.set_images(3, {outside});
    EXPECT_THROW(runner.prefill(3, prompt), Error);
}

// Images past the sliding window (24) and longer than it: each image row's window counts back from
// its own position and reaches to its image's start (backend/attention_span.h). CPU = reference, and
// the same logits with the text in chunks, the image whole, then token by token.
struct WindowLayout {
    int32_t image_begin, image_rows, length;
};

void add_layout_rows(Batch& b, int32_t seq, const WindowLayout& l, int32_t from, int32_t to, const std::vector<float>& image) {
    for (int32_t p = from; p < to; ++p) {
        const bool in_image = p >= l.image_begin && p < l.image_begin + l.image_rows;
        b.add(in_image ? 7 : text_token(p, 0), p, seq, p, true);
        if (in_image)
            b.set_last_row_embedding(std::span(image).subspan(size_t((p - l.image_begin) % kImageRows * kDim), size_t(kDim)),
                                     l.image_begin + l.image_rows - 1);
    }
}

std::vector<float> run_layout(const std::string& backend, const WindowLayout& l, bool chunked) {
    auto model = open(backend);
    const auto image = image_embeddings(4);
    std::vector<float> logits;
    auto step = [&](int32_t from, int32_t to) {
        Batch b;
        const int32_t s = b.add_sequence(blocks(0, (l.length + kBlock - 1) / kBlock));
        add_layout_rows(b, s, l, from, to, image);
        const auto part = model->forward(b);
        logits.insert(logits.end(), part.begin(), part.end());
    };
    if (!chunked) {
        step(0, l.length);
        return logits;
    }
    for (int32_t p = 0; p < l.image_begin; p += 5) step(p, std::min(p + 5, l.image_begin));
    step(l.image_begin, l.image_begin + l.image_rows);
    for (int32_t p = l.image_begin + l.image_rows; p < l.length; ++p) step(p, p + 1);
    return logits;
}

TEST(ImageRows, PastTheSlidingWindowAndLongerThanIt) {
    for (const WindowLayout l : {WindowLayout{40, 12, 56}, WindowLayout{6, 30, 40}}) {
        const auto cpu = run_layout("cpu", l, false);
        const auto ref = run_layout("reference", l, false);
        ASSERT_EQ(cpu.size(), size_t(l.length * 300));
        ASSERT_EQ(ref.size(), cpu.size());
        const double tol = 1e-5 * max_abs(ref);
        for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(cpu[i], ref[i], tol) << "image at " << l.image_begin << ", row " << i / 300;
        const auto chunked = run_layout("cpu", l, true);
        ASSERT_EQ(chunked.size(), cpu.size());
        for (size_t i = 0; i < cpu.size(); ++i) ASSERT_EQ(chunked[i], cpu[i]) << "image at " << l.image_begin << ", row " << i / 300;
    }
}

TEST(ImageRows, Refusals) {
    auto model = open("cpu");
    const std::vector<float> e(size_t(kDim), 0.5f);
    {  // the image's end is not in this step
        Batch b;
        const int32_t s = b.add_sequence({0, 1});
        b.add(7, 0, s, 0, true);
        b.set_last_row_embedding(e, 3);
        b.add(7, 1, s, 1, true);
        b.set_last_row_embedding(e, 3);
        EXPECT_THROW(model->forward(b), Error);
    }
    {  // embedding floats that do not match the rows
        Batch b;
        const int32_t s = b.add_sequence({0});
        b.add(7, 0, s, 0, true);
        b.set_last_row_embedding(std::span(e).first(10), 0);
        EXPECT_THROW(model->forward(b), Error);
    }
    {  // a model without image input (llama)
        RandomModelSpec spec;
        const std::string path = test::temp_path("image_rows_llama.gguf");
        write_random_model(spec, nullptr, path);
        auto llama = open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = 8});
        EXPECT_FALSE(llama->info().image_input);
        EXPECT_TRUE(model->info().image_input);
        Batch b;
        const int32_t s = b.add_sequence({0});
        b.add(7, 0, s, 0, true);
        b.set_last_row_embedding(std::vector<float>(size_t(spec.dim), 0.5f), 0);
        try {
            llama->forward(b);
            FAIL() << "a llama model took image rows";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find("takes no image input"), std::string::npos) << err.what();
        }
    }
}

}  // namespace
}  // namespace pagoda::model
