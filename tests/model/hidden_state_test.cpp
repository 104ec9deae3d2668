// The final hidden state a step hands back for rows that want it (what embeddings pool): equal to
// the reference backend's within f32 rounding, bitwise the same whatever else is in the batch, and
// asking for it changes no logit.
#include <cmath>
#include <gtest/gtest.h>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

struct Seq {
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
};

// One step over fresh sequences: every token of each; hidden rows where `hidden(seq, pos)`, logits
// for each sequence's last token.
template <typename HiddenFn>
Batch make_batch(const std::vector<Seq>& seqs, int32_t block_size, HiddenFn hidden) {
    Batch b;
    for (size_t s = 0; s < seqs.size(); ++s) {
        const int32_t index = b.add_sequence(seqs[s].blocks);
        for (size_t p = 0; p < seqs[s].tokens.size(); ++p)
            b.add(seqs[s].tokens[p], int32_t(p), index,
                  int64_t(seqs[s].blocks[p / size_t(block_size)]) * block_size + int64_t(p) % block_size,
                  p + 1 == seqs[s].tokens.size(), hidden(s, p));
    }
    return b;
}

std::vector<int32_t> tokens_of(int n, int seed, int64_t vocab) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + seed * 11 + 5) % vocab));
    return t;
}

class HiddenState : public ::testing::TestWithParam<bool> {};  // fusion on / off

TEST_P(HiddenState, MatchesReferenceAndIsBatchInvariant) {
    RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 48; spec.n_heads = 6; spec.n_kv_heads = 2; spec.ffn_dim = 72; spec.vocab_size = 300;
    spec.type = gguf::GgmlType::F32;
    const std::string path = test::temp_path("hidden_state.gguf");
    write_random_model(spec, nullptr, path);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const StepModelOptions options{.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                   .tokens_wanted = 64, .fusion = GetParam()};
    auto cpu = open_step_model(file, options);
    StepModelOptions ref_options = options;
    ref_options.backend = "reference";
    auto reference = open_step_model(file, ref_options);
    const int64_t dim = cpu->info().hidden_size, vocab = cpu->info().vocab_size;
    ASSERT_EQ(dim, 48);
    ASSERT_EQ(reference->info().hidden_size, dim);

    const Seq a{tokens_of(11, 1, vocab), {0, 1, 2}}, b{tokens_of(6, 2, vocab), {3, 4}};
    auto all_of_a_last_of_b = [&](size_t s, size_t p) { return s == 0 || p + 1 == b.tokens.size(); };
    const Batch both = make_batch({a, b}, 4, all_of_a_last_of_b);
    ASSERT_EQ(both.n_hidden_rows(), 12);

    const std::vector<float> logits = cpu->forward(both);
    const std::vector<float> hidden = cpu->hidden_rows();
    ASSERT_EQ(hidden.size(), size_t(12 * dim));
    reference->forward(both);
    const std::vector<float>& want = reference->hidden_rows();
    ASSERT_EQ(want.size(), hidden.size());
    for (size_t i = 0; i < hidden.size(); ++i) ASSERT_NEAR(hidden[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << i;

    // The hidden row is what the head reads: b's last logits are that row times output.weight
    // (F32, [vocab][dim] row-major), so the rows are taken after the final norm, not before.
    const gguf::TensorInfo* head = file->find_tensor("output.weight");
    ASSERT_NE(head, nullptr);
    const auto* w = reinterpret_cast<const float*>(head->data);
    const float* h_b = hidden.data() + 11 * dim;
    const float* l_b = logits.data() + vocab;  // second logits row: b's last token
    for (int64_t v = 0; v < vocab; ++v) {
        double dot = 0;
        for (int64_t i = 0; i < dim; ++i) dot += double(h_b[i]) * double(w[v * dim + i]);
        ASSERT_NEAR(l_b[v], dot, 1e-4 * (1 + std::abs(dot))) << "logit " << v;
    }

    // Asking for hidden states changes no logit.
    const std::vector<float> plain = cpu->forward(make_batch({a, b}, 4, [](size_t, size_t) { return false; }));
    EXPECT_TRUE(cpu->hidden_rows().empty());
    ASSERT_EQ(plain.size(), logits.size());
    EXPECT_EQ(plain, logits);

    // Sequence a alone: the same rows, bitwise.
    cpu->forward(make_batch({a}, 4, [](size_t, size_t) { return true; }));
    const std::vector<float>& alone = cpu->hidden_rows();
    ASSERT_EQ(alone.size(), size_t(11 * dim));
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), hidden.begin()));
}

INSTANTIATE_TEST_SUITE_P(Fusion, HiddenState, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "fused" : "unfused"; });

}  // namespace
}  // namespace pagoda::model
