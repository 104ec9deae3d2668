// The tokenizer.json path reproduces the fixture vocabularies' test vectors: each GGUF vocabulary is
// written as tokenizer.json + tokenizer_config.json, read back, and must give exactly the .out ids
// (and decode them back to the text); the same holds for the GGUF keys made from the read spec, and
// the HF-read tokenizer agrees with the GGUF one on random text, special-token parsing included.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/vector_file.h"
#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;

struct Roundtrip {
    std::unique_ptr<Tokenizer> original, from_hf, from_keys;
    tokenizer::HfTokenizer hf;
};

Roundtrip roundtrip(const std::string& name) {
    Roundtrip r;
    auto file = gguf::File::open(vocab_path(name));
    const tokenizer::VocabSpec spec = tokenizer::vocab_spec_from_gguf(*file);
    r.original = Tokenizer::from_vocab(tokenizer::Vocab::from_spec(spec));
    const std::string dir = temp_path("hf_roundtrip_" + name);
    std::filesystem::remove_all(dir);
    tokenizer::write_hf_tokenizer(dir, spec, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
    r.hf = tokenizer::read_hf_tokenizer(dir);
    r.from_hf = Tokenizer::from_vocab(tokenizer::Vocab::from_spec(r.hf.spec));
    gguf::Writer writer;
    for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(r.hf.spec, r.hf.chat_template)) writer.set(key, value);
    writer.write(dir + "/vocab.gguf");
    r.from_keys = Tokenizer::from_gguf(*gguf::File::open(dir + "/vocab.gguf"));
    std::filesystem::remove_all(dir);
    return r;
}

void check(const std::string& name) {
    PAGODA_REQUIRE_FIXTURE(vocab_path(name));
    PAGODA_REQUIRE_FIXTURE(vocab_path(name) + ".inp");
    Roundtrip r = roundtrip(name);
    EXPECT_EQ(r.hf.chat_template, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
    auto cases = tokenizer::split_vector_cases(tokenizer::read_text_file(vocab_path(name) + ".inp"));
    auto expected = tokenizer::parse_vector_ids(tokenizer::read_text_file(vocab_path(name) + ".out"));
    ASSERT_EQ(cases.size(), expected.size());
    const EncodeOptions plain{.add_bos = false, .add_eos = false, .parse_special = false};
    int failures = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        auto ids = r.from_hf->encode(cases[i], plain);
        EXPECT_EQ(ids, expected[i]) << name << " case " << i << ": '" << cases[i] << "'";
        EXPECT_EQ(r.from_hf->decode(ids), cases[i]) << name << " case " << i;
        EXPECT_EQ(r.from_keys->encode(cases[i], plain), expected[i]) << name << " (GGUF keys) case " << i;
        failures += ids != expected[i];
    }
    EXPECT_EQ(failures, 0) << name;

    // The defaults that encode() applies and the special ids survive the trip.
    EXPECT_EQ(r.from_hf->bos(), r.original->bos());
    EXPECT_EQ(r.from_hf->eos(), r.original->eos());
    EXPECT_EQ(r.from_hf->vocab().add_bos(), r.original->vocab().add_bos());
    EXPECT_EQ(r.from_hf->vocab().add_space_prefix(), r.original->vocab().add_space_prefix());
    EXPECT_EQ(r.from_hf->vocab().eog_ids(), r.original->vocab().eog_ids());
    EXPECT_EQ(r.from_hf->n_vocab(), r.original->n_vocab());

    // Random text, with and without special-token parsing, and BOS by default.
    std::mt19937 rng(1234);
    std::vector<std::string> specials;
    for (int32_t id : r.original->vocab().literal_tokens()) specials.push_back(r.original->vocab().text(id));
    for (int n = 0; n < 300; ++n) {
        std::string text = random_unicode_text(rng, 1 + n % 40);
        if (!specials.empty() && n % 3 == 0) text.insert(text.size() / 2, specials[size_t(n) % specials.size()]);
        const EncodeOptions special{.parse_special = true};
        ASSERT_EQ(r.from_hf->encode(text, special), r.original->encode(text, special)) << name << ": '" << text << "'";
        ASSERT_EQ(r.from_hf->encode(text, plain), r.original->encode(text, plain)) << name << ": '" << text << "'";
        ASSERT_EQ(r.from_keys->encode(text, special), r.original->encode(text, special)) << name << " (GGUF keys)";
    }
}

TEST(HfTokenizerRoundtrip, LlamaSpm) { check("llama-spm"); }
TEST(HfTokenizerRoundtrip, Phi3) { check("phi-3"); }
TEST(HfTokenizerRoundtrip, Gpt2) { check("gpt-2"); }
TEST(HfTokenizerRoundtrip, DeepseekCoder) { check("deepseek-coder"); }
TEST(HfTokenizerRoundtrip, Falcon) { check("falcon"); }

}  // namespace
}  // namespace pagoda::test
