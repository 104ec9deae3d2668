// The bert and nomic-bert encoders (model/arch/bert.cpp) on random models from gen-model's writer: its hidden
// states on the CPU backend equal the reference backend's within f32 rounding, each sequence's rows
// are bitwise the same alone as in a batch of mixed lengths, attention is bidirectional (a later
// token changes an earlier row), and a model without a head refuses logits and generation.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

constexpr int32_t kBlock = 4;

struct Seq {
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
};

// One step of whole sequences, every row wanting its hidden state, none its logits.
Batch encoder_batch(const std::vector<Seq>& seqs) {
    Batch b;
    for (const Seq& s : seqs) {
        const int32_t index = b.add_sequence(s.blocks);
        for (size_t p = 0; p < s.tokens.size(); ++p)
            b.add(s.tokens[p], int32_t(p), index, int64_t(s.blocks[p / kBlock]) * kBlock + int64_t(p) % kBlock, false, true);
    }
    return b;
}

std::vector<int32_t> tokens_of(int n, int seed, int64_t vocab) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + seed * 11 + 5) % vocab));
    return t;
}

std::shared_ptr<const gguf::File> random_bert(const std::string& name, gguf::GgmlType type,
                                              const std::string& arch = "bert") {
    RandomModelSpec spec;
    spec.arch = arch;
    spec.n_layers = 2; spec.dim = 48; spec.n_heads = 6; spec.ffn_dim = 72; spec.vocab_size = 300;
    spec.context_length = 96;
    spec.type = type;
    const std::string path = test::temp_path(name);
    write_random_model(spec, nullptr, path);
    return std::shared_ptr<const gguf::File>(gguf::File::open(path));
}

StepModelOptions options(const std::string& backend) {
    return {.backend = backend, .threads = 2, .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256};
}

class EncoderArch : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderArch, MatchesTheReferenceAndIsBatchInvariant) {
    auto file = random_bert("encoder_" + GetParam() + ".gguf", gguf::GgmlType::F32, GetParam());
    auto cpu = open_step_model(file, options("cpu"));
    auto reference = open_step_model(file, options("reference"));
    const int64_t dim = cpu->info().hidden_size, vocab = cpu->info().vocab_size;
    ASSERT_EQ(dim, 48);
    EXPECT_TRUE(cpu->info().embedding_only);
    EXPECT_TRUE(cpu->info().bidirectional);
    EXPECT_EQ(cpu->info().max_context, 96);  // bert: the position table's rows; nomic-bert: its context

    // Mixed lengths, one longer than an attention tile (64 keys) and a query tile.
    const std::vector<Seq> seqs = {{tokens_of(70, 1, vocab), {}}, {tokens_of(5, 2, vocab), {}}, {tokens_of(23, 3, vocab), {}}};
    std::vector<Seq> placed = seqs;
    int32_t next = 0;
    for (Seq& s : placed)
        for (size_t i = 0; i < (s.tokens.size() + kBlock - 1) / kBlock; ++i) s.blocks.push_back(next++);
    const Batch batch = encoder_batch(placed);
    EXPECT_TRUE(cpu->forward(batch).empty());  // no head, no logits
    const std::vector<float> got = cpu->hidden_rows();
    reference->forward(batch);
    const std::vector<float>& want = reference->hidden_rows();
    ASSERT_EQ(got.size(), size_t(98 * dim));
    ASSERT_EQ(want.size(), got.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    EXPECT_LT(worst, 1e-4) << "LayerNorm keeps rows at unit scale, so an absolute bound";

    // Each sequence alone (in other blocks) gives its rows of the batch, bitwise.
    size_t row = 0;
    for (size_t s = 0; s < placed.size(); ++s) {
        Seq alone = placed[s];
        for (auto& b : alone.blocks) b = (b + 13) % next;  // other physical blocks
        cpu->forward(encoder_batch({alone}));
        const std::vector<float>& rows = cpu->hidden_rows();
        ASSERT_EQ(rows.size(), alone.tokens.size() * size_t(dim));
        for (size_t i = 0; i < rows.size(); ++i)
            ASSERT_EQ(rows[i], got[row * size_t(dim) + i]) << "sequence " << s << " element " << i;
        row += alone.tokens.size();
    }

    // Bidirectional: changing the last token of sequence 1 changes its first row.
    Seq changed = placed[1];
    changed.tokens.back() = (changed.tokens.back() + 1) % int32_t(vocab);
    cpu->forward(encoder_batch({changed}));
    const std::vector<float> first_changed(cpu->hidden_rows().begin(), cpu->hidden_rows().begin() + dim);
    const std::vector<float> first(got.begin() + 70 * dim, got.begin() + 71 * dim);
    EXPECT_NE(first_changed, first);
}

INSTANTIATE_TEST_SUITE_P(Archs, EncoderArch, ::testing::Values("bert", "nomic-bert"),
                         [](const auto& info) { return info.param == "bert" ? std::string("bert") : std::string("nomic_bert"); });

TEST(EncoderModel, F16BertMatchesTheReference) {
    auto file = random_bert("encoder_bert_f16.gguf", gguf::GgmlType::F16);
    auto cpu = open_step_model(file, options("cpu"));
    auto reference = open_step_model(file, options("reference"));
    Seq s{tokens_of(31, 4, cpu->info().vocab_size), {}};
    for (int32_t i = 0; i < 8; ++i) s.blocks.push_back(7 - i);
    const Batch batch = encoder_batch({s});
    cpu->forward(batch);
    reference->forward(batch);
    const std::vector<float>& got = cpu->hidden_rows();
    const std::vector<float>& want = reference->hidden_rows();
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    // The CPU may round activations to bf16 for f16 weights (conformance.h: 1e-2 per matmul).
    EXPECT_LT(worst, 0.1);
}

// A device backend (vulkan, where this build and machine have it) runs both encoders whole.
TEST(EncoderModel, DeviceBackendsMatchTheReference) {
    for (const std::string& device : backend::testing::device_backends_under_test())
        for (const std::string arch : {"bert", "nomic-bert"}) {
            auto file = random_bert("encoder_device_" + arch + ".gguf", gguf::GgmlType::F32, arch);
            auto dev = open_step_model(file, options(device));
            auto reference = open_step_model(file, options("reference"));
            std::vector<Seq> seqs = {{tokens_of(70, 1, 300), {}}, {tokens_of(9, 2, 300), {}}};
            int32_t next = 0;
            for (Seq& s : seqs)
                for (size_t i = 0; i < (s.tokens.size() + kBlock - 1) / kBlock; ++i) s.blocks.push_back(next++);
            const Batch batch = encoder_batch(seqs);
            dev->forward(batch);
            reference->forward(batch);
            const std::vector<float>& got = dev->hidden_rows();
            const std::vector<float>& want = reference->hidden_rows();
            ASSERT_EQ(got.size(), want.size()) << device << " " << arch;
            double worst = 0;
            for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
            EXPECT_LT(worst, 1e-4) << device << " " << arch;
        }
}

TEST(EncoderModel, RefusesLogitsAndTooLongInputs) {
    auto file = random_bert("encoder_bert_refuse.gguf", gguf::GgmlType::F32);
    auto cpu = open_step_model(file, options("cpu"));
    Batch b;
    const int32_t index = b.add_sequence({0});
    b.add(5, 0, index, 0, true, false);  // wants logits
    try {
        cpu->forward(b);
        ADD_FAILURE() << "logits from an embedding model";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("embedding model"), std::string::npos) << e.what();
    }
    StepModelOptions too_long = options("cpu");
    too_long.max_context = 97;
    try {
        open_step_model(file, too_long);
        ADD_FAILURE() << "--ctx past the position table";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("96 learned positions"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::model
