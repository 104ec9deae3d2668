// vocab_spec_gguf_keys: a spec read from tokenizer files as GGUF keys — llama.cpp's tokenizer.ggml.*
// keys where they exist, tokenizer.pagoda.* for a regex pre-tokenizer, ignore_merges and strip
// flags — which Vocab::from_gguf reads back as the same vocabulary. Also the VocabSpec fields those
// files need, checked by Vocab::from_spec.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using tokenizer::VocabSpec;

const gguf::Value* find(const std::vector<std::pair<std::string, gguf::Value>>& keys, const std::string& key) {
    for (const auto& [k, v] : keys)
        if (k == key) return &v;
    return nullptr;
}

std::unique_ptr<gguf::File> as_gguf(const std::vector<std::pair<std::string, gguf::Value>>& keys, const std::string& name) {
    gguf::Writer writer;
    for (const auto& [k, v] : keys) writer.set(k, v);
    const std::string path = temp_path(name + ".gguf");
    writer.write(path);
    auto file = gguf::File::open(path);
    std::filesystem::remove(path);
    return file;
}

VocabSpec regex_spec() {
    VocabSpec s;
    s.model = "gpt2";
    s.pre = "hf-regex";
    s.pre_patterns = {"[ab]"};
    s.tokens = {"a", "b", "ab", "<|end|>", "Ġ"};
    s.token_types = {1, 1, 1, 3, 1};
    s.merges = {"a b"};
    s.eos = 3;
    s.add_bos = false;
    s.ignore_merges = true;
    s.rstrip_ids = {3};
    return s;
}

TEST(HfGgufKeys, KeysAndTheirTypes) {
    const auto keys = tokenizer::vocab_spec_gguf_keys(regex_spec(), "{{ x }}");
    ASSERT_NE(find(keys, "tokenizer.ggml.model"), nullptr);
    EXPECT_EQ(*find(keys, "tokenizer.ggml.model")->as_string(), "gpt2");
    EXPECT_EQ(find(keys, "tokenizer.ggml.eos_token_id")->type, gguf::ValueType::u32);
    EXPECT_EQ(find(keys, "tokenizer.ggml.token_type")->as_array()->element_type, gguf::ValueType::i32);
    EXPECT_EQ(*find(keys, "tokenizer.chat_template")->as_string(), "{{ x }}");
    EXPECT_EQ(find(keys, "tokenizer.ggml.bos_token_id"), nullptr) << "an unset id writes no key";
    EXPECT_EQ(find(keys, "tokenizer.ggml.scores"), nullptr);
    EXPECT_NE(find(keys, "tokenizer.pagoda.pre_patterns"), nullptr);
    EXPECT_EQ(find(keys, "tokenizer.pagoda.ignore_merges")->type, gguf::ValueType::boolean);
    EXPECT_EQ(find(tokenizer::vocab_spec_gguf_keys(regex_spec(), ""), "tokenizer.chat_template"), nullptr);
}

TEST(HfGgufKeys, FromGgufReadsThePagodaKeysBack) {
    auto file = as_gguf(tokenizer::vocab_spec_gguf_keys(regex_spec(), ""), "hf_keys_regex");
    const VocabSpec back = tokenizer::vocab_spec_from_gguf(*file);
    EXPECT_EQ(back.pre_patterns, (std::vector<std::string>{"[ab]"}));
    EXPECT_EQ(back.ignore_merges, std::optional<bool>(true));
    EXPECT_EQ(back.rstrip_ids, (std::vector<int64_t>{3}));
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    // The regex keeps a and b apart (no "ab"), and <|end|> eats the space after it.
    EXPECT_EQ(tok->encode("ab<|end|> a", {.parse_special = true}), (std::vector<int32_t>{0, 1, 3, 0}));
    EXPECT_TRUE(tok->vocab().rstrip(3));
    EXPECT_TRUE(tok->vocab().custom_pre_patterns());
}

TEST(HfGgufKeys, SpecFieldsAreChecked) {
    VocabSpec s = regex_spec();
    s.rstrip_ids = {9};
    EXPECT_THROW(tokenizer::Vocab::from_spec(s), Error);
    s = regex_spec();
    s.lstrip_ids = {-1};
    EXPECT_THROW(tokenizer::vocab_spec_gguf_keys(s, ""), Error);
    s = regex_spec();
    s.model = "llama";
    s.merges.clear();
    try {
        tokenizer::Vocab::from_spec(s);
        FAIL() << "a SentencePiece spec with regexes was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("BPE only"), std::string::npos) << e.what();
    }
    // ignore_merges overrides the name's default: "llama3" ignores merges, here it must not.
    s = regex_spec();
    s.pre_patterns.clear();
    s.pre = "llama3";
    s.ignore_merges = false;
    s.tokens = {"a", "b", "ab", "abc", "c"};
    s.token_types.clear();
    s.rstrip_ids.clear();
    s.eos.reset();
    s.merges = {"a b"};
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s));
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{2, 4}));
    s.ignore_merges.reset();
    EXPECT_EQ(tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(s))->encode("abc"), (std::vector<int32_t>{3}));
}

}  // namespace
}  // namespace pagoda::test
