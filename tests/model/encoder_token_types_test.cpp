// Token types (segment ids) in an encoder (model/arch/bert.cpp): a step's per-token types select rows
// of the token-type embedding. A run whose tokens are all type 1 equals a run of type 0 on the same
// model with the table's two rows swapped (the lookup, checked against a differently built model);
// mixed types on the CPU and Vulkan backends equal the reference's, and a typed sequence's rows are
// bitwise the same alone as in a batch beside an untyped one. A type past the table is refused.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>

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
    std::vector<int32_t> tokens, types, blocks;  // types empty: untyped (all 0)
};

Batch typed_batch(const std::vector<Seq>& seqs) {
    Batch b;
    for (const Seq& s : seqs) {
        const int32_t index = b.add_sequence(s.blocks);
        for (size_t p = 0; p < s.tokens.size(); ++p) {
            b.add(s.tokens[p], int32_t(p), index, int64_t(s.blocks[p / kBlock]) * kBlock + int64_t(p) % kBlock, false, true);
            if (!s.types.empty()) b.set_token_type(s.types[p]);
        }
    }
    return b;
}

Seq make_seq(int n, int seed, int first_block, int type_from = -1) {
    Seq s;
    for (int i = 0; i < n; ++i) s.tokens.push_back((i * 29 + seed * 7 + 3) % 300);
    if (type_from >= 0)
        for (int i = 0; i < n; ++i) s.types.push_back(i >= type_from ? 1 : 0);
    for (int i = 0; i < (n + kBlock - 1) / kBlock; ++i) s.blocks.push_back(first_block + i);
    return s;
}

StepModelOptions options(const std::string& backend) {
    return {.backend = backend, .threads = 2, .kv = {.block_size = kBlock, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256};
}

// The random bert's bytes, kept alive for the Files parsed from them.
struct BertBytes {
    std::vector<uint8_t> bytes;
    std::shared_ptr<const gguf::File> parse(const std::string& name) const {
        return std::shared_ptr<const gguf::File>(gguf::File::parse(bytes.data(), bytes.size(), name));
    }
};

BertBytes random_bert_bytes() {
    RandomModelSpec spec;
    spec.arch = "bert";
    spec.n_layers = 2; spec.dim = 48; spec.n_heads = 6; spec.ffn_dim = 72; spec.vocab_size = 300;
    spec.context_length = 96;
    spec.type = gguf::GgmlType::F32;
    const std::string path = test::temp_path("encoder_token_types.gguf");
    write_random_model(spec, nullptr, path);
    std::ifstream in(path, std::ios::binary);
    return {std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {})};
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    return worst;
}

TEST(EncoderTokenTypes, TypeOneIsTheSecondRowOfTheTable) {
    static const BertBytes original = random_bert_bytes();
    auto file = original.parse("typed.gguf");
    const gguf::TensorInfo* table = file->find_tensor("token_types.weight");
    ASSERT_NE(table, nullptr);
    ASSERT_EQ(table->shape, (std::vector<int64_t>{48, 2}));
    // The same model with the table's rows swapped.
    static BertBytes swapped = original;
    const size_t at = size_t(table->data - original.bytes.data()), row = 48 * sizeof(float);
    std::swap_ranges(swapped.bytes.begin() + std::ptrdiff_t(at), swapped.bytes.begin() + std::ptrdiff_t(at + row),
                     swapped.bytes.begin() + std::ptrdiff_t(at + row));
    auto swapped_file = swapped.parse("swapped.gguf");

    for (const std::string backend : {"reference", "cpu"}) {
        auto model = open_step_model(file, options(backend));
        EXPECT_EQ(model->info().n_token_types, 2);
        auto other = open_step_model(swapped_file, options(backend));
        const Seq ones = make_seq(13, 1, 0, 0), zeros = make_seq(13, 1, 0, 13), untyped = make_seq(13, 1, 0);
        model->forward(typed_batch({ones}));
        const std::vector<float> got = model->hidden_rows();
        other->forward(typed_batch({zeros}));
        EXPECT_EQ(got, other->hidden_rows()) << backend << ": type 1 reads the table's second row";
        other->forward(typed_batch({untyped}));
        EXPECT_EQ(got, other->hidden_rows()) << backend << ": no types is all type 0";
        model->forward(typed_batch({untyped}));
        EXPECT_GT(worst_difference(got, model->hidden_rows()), 1e-3) << backend << ": the types change the rows";
    }
}

TEST(EncoderTokenTypes, MixedTypesMatchTheReferenceAndAreBatchInvariant) {
    static const BertBytes original = random_bert_bytes();
    auto file = original.parse("typed_mixed.gguf");
    auto reference = open_step_model(file, options("reference"));
    // A pair typed 0 then 1, beside an untyped sequence, one longer than an attention tile.
    const Seq pair = make_seq(70, 2, 0, 31), single = make_seq(9, 3, 18);
    const Batch batch = typed_batch({pair, single});
    reference->forward(batch);
    const std::vector<float> want = reference->hidden_rows();
    std::vector<std::string> backends = {"cpu"};
    for (const std::string& d : backend::testing::device_backends_under_test()) backends.push_back(d);
    for (const std::string& backend : backends) {
        auto model = open_step_model(file, options(backend));
        model->forward(batch);
        const std::vector<float> got = model->hidden_rows();
        EXPECT_LT(worst_difference(got, want), 1e-4) << backend;
        Seq alone = pair;
        for (auto& b : alone.blocks) b += 3;  // other physical blocks
        model->forward(typed_batch({alone}));
        const std::vector<float>& rows = model->hidden_rows();
        ASSERT_EQ(rows.size(), size_t(70 * 48));
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), got.begin())) << backend << ": the pair alone = in the batch";
    }
}

TEST(EncoderTokenTypes, RefusesATypePastTheTable) {
    static const BertBytes original = random_bert_bytes();
    auto file = original.parse("typed_refuse.gguf");
    for (const std::string backend : {"reference", "cpu"}) {
        auto model = open_step_model(file, options(backend));
        Seq s = make_seq(5, 4, 0, 2);
        s.types[3] = 2;
        try {
            model->forward(typed_batch({s}));
            ADD_FAILURE() << backend << ": type 2 of a 2-row table";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("token type 2 is outside the 2 rows"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace pagoda::model
