// The llama.cpp tokenizer test vectors (ids from each model's original Hugging Face tokenizer) and the
// stories260K vocabulary's encodings made with llama2.c's run.c: every case must match exactly.
#include <gtest/gtest.h>

#include "tokenizer/vector_file.h"
#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

using tokenizer::EncodeOptions;

void check_vectors(const std::string& vocab, const std::string& inp, const std::string& out) {
    PAGODA_REQUIRE_FIXTURE(vocab_path(vocab));
    PAGODA_REQUIRE_FIXTURE(inp);
    PAGODA_REQUIRE_FIXTURE(out);
    const tokenizer::Tokenizer* tok = fixture_tokenizer(vocab);
    ASSERT_NE(tok, nullptr);
    auto cases = tokenizer::split_vector_cases(tokenizer::read_text_file(inp));
    auto expected = tokenizer::parse_vector_ids(tokenizer::read_text_file(out));
    ASSERT_GE(cases.size(), 40u);
    ASSERT_EQ(cases.size(), expected.size()) << "case count of " << inp << " vs " << out;
    EncodeOptions plain{.add_bos = false, .add_eos = false, .parse_special = false};
    int failures = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        auto ids = tok->encode(cases[i], plain);
        EXPECT_EQ(ids, expected[i]) << vocab << " case " << i << ": '" << cases[i] << "'";
        failures += ids != expected[i];
        // Every case is valid UTF-8, so decoding gives the text back.
        EXPECT_EQ(tok->decode(ids), cases[i]) << vocab << " case " << i << " does not round-trip";
    }
    EXPECT_EQ(failures, 0) << vocab;
}

TEST(TokenizerVectors, LlamaSpm) {
    check_vectors("llama-spm", vocab_path("llama-spm") + ".inp", vocab_path("llama-spm") + ".out");
}
TEST(TokenizerVectors, Phi3) { check_vectors("phi-3", vocab_path("phi-3") + ".inp", vocab_path("phi-3") + ".out"); }
TEST(TokenizerVectors, Gpt2) { check_vectors("gpt-2", vocab_path("gpt-2") + ".inp", vocab_path("gpt-2") + ".out"); }
TEST(TokenizerVectors, DeepseekCoder) {
    check_vectors("deepseek-coder", vocab_path("deepseek-coder") + ".inp", vocab_path("deepseek-coder") + ".out");
}
TEST(TokenizerVectors, Falcon) {
    check_vectors("falcon", vocab_path("falcon") + ".inp", vocab_path("falcon") + ".out");
}
TEST(TokenizerVectors, Stories260KMatchesRunC) {
    check_vectors("stories260K", fixture("models/golden/encode_tests.inp"),
                  fixture("models/golden/tok512_runc_encode.out"));
}

// The prompt ids run.c fed the model in the golden runs (BOS added by default).
TEST(TokenizerVectors, Stories260KPromptWithBos) {
    PAGODA_REQUIRE_FIXTURE(vocab_path("stories260K"));
    std::string golden = fixture("models/golden/stories260K_greedy_once_upon_a_time_n200.ids.txt");
    PAGODA_REQUIRE_FIXTURE(golden);
    std::string content = tokenizer::read_text_file(golden);
    size_t at = content.find("prompt_tokens");
    ASSERT_NE(at, std::string::npos);
    size_t colon = content.find(':', at);
    size_t eol = content.find('\n', colon);
    auto expected = tokenizer::parse_vector_ids(content.substr(colon + 1, eol - colon - 1));
    ASSERT_EQ(expected.size(), 1u);
    const tokenizer::Tokenizer* tok = fixture_tokenizer("stories260K");
    EXPECT_EQ(tok->encode("Once upon a time"), expected[0]);
}

}  // namespace
}  // namespace pagoda::test
