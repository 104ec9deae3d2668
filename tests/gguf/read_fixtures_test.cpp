// Reads the real GGUF fixtures in ../shared and checks facts known independently of our reader
// (the stories260K model card and llama.cpp's vocab files).
#include <filesystem>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"

namespace pagoda::gguf {
namespace {

TEST(GgufFixtures, Stories260KMetadataAndTensors) {
    std::string path = test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(path);
    auto f = File::open(path);
    EXPECT_TRUE(f->version() == 2 || f->version() == 3);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_int("llama.block_count"), 5);
    EXPECT_EQ(f->get_uint("llama.embedding_length"), 64u);
    EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
    EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
    EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
    EXPECT_EQ(f->get_strings("tokenizer.ggml.tokens").size(), 512u);
    EXPECT_EQ(f->get_floats("tokenizer.ggml.scores").size(), 512u);
    EXPECT_EQ(f->get_ints("tokenizer.ggml.token_type").size(), 512u);
    EXPECT_EQ(f->get_string_or("no.such.key", "x"), "x");
    EXPECT_THROW(f->get_int("general.architecture"), Error);
    EXPECT_THROW(f->get_string("no.such.key"), Error);

    const TensorInfo* emb = f->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, GgmlType::F32);
    EXPECT_EQ(emb->shape, (std::vector<int64_t>{64, 512}));
    EXPECT_EQ(emb->n_elements(), 64 * 512);
    EXPECT_EQ(emb->n_bytes, 64u * 512u * 4u);
    // 5 layers x 9 tensors + token_embd + output_norm (+ output, if untied).
    EXPECT_GE(f->tensors().size(), 47u);
    EXPECT_NE(f->find_tensor("blk.4.ffn_down.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.5.ffn_down.weight"), nullptr);

    // Tensor views lie inside the file and account for (almost) all of it.
    uint64_t file_size = std::filesystem::file_size(path);
    uint64_t total = 0;
    for (const TensorInfo& t : f->tensors()) {
        EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, file_size) << t.name;
        total += t.n_bytes;
    }
    EXPECT_LE(f->data_offset() + total, file_size);
    EXPECT_GT(f->data_offset() + total + f->tensors().size() * f->alignment(), file_size);
}

TEST(GgufFixtures, EveryVocabFileParses) {
    std::string dir = test::fixture("vocab");
    PAGODA_REQUIRE_FIXTURE(dir);
    int seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".gguf") continue;
        ++seen;
        SCOPED_TRACE(entry.path().string());
        auto f = File::open(entry.path().string());
        EXPECT_TRUE(f->version() == 2 || f->version() == 3);
        std::string model = f->get_string("tokenizer.ggml.model");
        EXPECT_TRUE(model == "llama" || model == "gpt2") << model;
        auto tokens = f->get_strings("tokenizer.ggml.tokens");
        EXPECT_GT(tokens.size(), 1000u);
        if (f->has("tokenizer.ggml.token_type")) {
            EXPECT_EQ(f->get_ints("tokenizer.ggml.token_type").size(), tokens.size());
        }
        if (model == "gpt2") {
            EXPECT_GT(f->get_strings("tokenizer.ggml.merges").size(), 1000u);
        }
        for (const auto& [key, value] : f->metadata()) EXPECT_FALSE(value.to_display().empty()) << key;
    }
    EXPECT_EQ(seen, 5);
}

TEST(GgufFixtures, SpecificVocabFacts) {
    std::string path = test::fixture("vocab/ggml-vocab-llama-spm.gguf");
    PAGODA_REQUIRE_FIXTURE(path);
    auto f = File::open(path);
    auto tokens = f->get_strings("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 32000u);  // Llama 2's SentencePiece vocabulary
    EXPECT_EQ(tokens[0], "<unk>");
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(tokens[2], "</s>");
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(f->get_uint("tokenizer.ggml.bos_token_id"), 1u);
    EXPECT_EQ(f->get_uint("tokenizer.ggml.eos_token_id"), 2u);
}

}  // namespace
}  // namespace pagoda::gguf
