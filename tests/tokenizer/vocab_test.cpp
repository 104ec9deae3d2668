// Vocabulary loading: per-model defaults, validation errors, end-of-generation tokens, special-token
// parsing rules, and decoding of each token type.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

using namespace pagoda::tokenizer;

VocabSpec small_spm() {
    VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "<|im_end|>", "<tool>", "<0x41>"};
    s.scores = {0, 0, 0, -1, -2, -2, -0.5f, -0.25f, 0, 0, 0};
    s.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 4, 4, 6};
    return s;
}

VocabSpec small_bpe() {
    VocabSpec s;
    s.model = "gpt2";
    s.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
        std::string t;
        byte_level_encode(std::string(1, static_cast<char>(b)), t);
        s.tokens.push_back(t);
    }
    s.tokens.push_back("\xC4\xA0" "a");  // "Ġa"
    s.merges = {"\xC4\xA0 a"};
    s.tokens.push_back("<|endoftext|>");
    s.tokens.push_back("<|im_start|>");
    s.token_types.assign(s.tokens.size(), 1);
    s.token_types[257] = 3;
    s.token_types[258] = 3;
    s.eos = 257;
    s.bos = 257;
    return s;
}

TEST(Vocab, SpmDefaults) {
    Vocab v = Vocab::from_spec(small_spm());
    EXPECT_EQ(v.type(), VocabType::spm);
    EXPECT_EQ(v.bos(), 1);
    EXPECT_EQ(v.eos(), 2);
    EXPECT_EQ(v.unk(), 0);
    EXPECT_TRUE(v.add_bos());
    EXPECT_FALSE(v.add_eos());
    EXPECT_TRUE(v.add_space_prefix());
    EXPECT_EQ(v.byte_token('A'), 10);
    EXPECT_EQ(v.byte_value(10), 'A');
    // <|im_end|> is recognised as end of generation and becomes a control token.
    EXPECT_TRUE(v.is_eog(8));
    EXPECT_TRUE(v.is_eog(2));
    EXPECT_FALSE(v.is_eog(1));
    EXPECT_EQ(v.token_type(8), TokenType::control);
    EXPECT_EQ(v.eot(), 8);
}

TEST(Vocab, BpeDefaultsDependOnPreTokenizer) {
    VocabSpec s = small_bpe();
    Vocab v = Vocab::from_spec(s);
    EXPECT_EQ(v.type(), VocabType::bpe);
    EXPECT_FALSE(v.add_bos());
    EXPECT_FALSE(v.add_space_prefix());
    EXPECT_FALSE(v.ignore_merges());
    EXPECT_EQ(v.merge_rank("\xC4\xA0", "a"), 0);
    EXPECT_EQ(v.merge_rank("a", "\xC4\xA0"), -1);
    s.pre = "llama-bpe";
    Vocab l3 = Vocab::from_spec(s);
    EXPECT_TRUE(l3.add_bos());
    EXPECT_TRUE(l3.ignore_merges());
    s.add_bos = false;
    EXPECT_FALSE(Vocab::from_spec(s).add_bos());
    s.pre = "";
    EXPECT_EQ(Vocab::from_spec(s).pre(), "default");
}

TEST(Vocab, InvalidInputsGiveClearErrors) {
    auto expect_error = [](VocabSpec s, const std::string& fragment) {
        try {
            Vocab::from_spec(s);
            ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    VocabSpec s = small_spm();
    s.model = "rwkv";
    expect_error(s, "not supported");
    s = small_spm();
    s.tokens.clear();
    s.scores.clear();
    s.token_types.clear();
    expect_error(s, "empty");
    s = small_spm();
    s.scores.pop_back();
    expect_error(s, "scores");
    s = small_spm();
    s.token_types[3] = 9;
    expect_error(s, "token_type[3]");
    s = small_spm();
    s.bos = 11;
    expect_error(s, "BOS token id 11 is out of range");
    s = small_spm();
    s.eos = -5;
    expect_error(s, "EOS token id -5");
    VocabSpec b = small_bpe();
    b.pre = "my-new-model";
    expect_error(b, "pre-tokenizer 'my-new-model'");
    b = small_bpe();
    b.merges = {"nospace"};
    expect_error(b, "merges[0]");
}

TEST(Vocab, GgufLoadErrorsNameTheProblem) {
    auto write_and_load = [](gguf::Writer& w) {
        std::string path = temp_path("vocab_test.gguf");
        w.write(path);
        auto file = gguf::File::open(path);
        return Tokenizer::from_gguf(*file);
    };
    gguf::Writer w;
    w.set("tokenizer.ggml.model", gguf::Value::string("rwkv"));
    w.set("tokenizer.ggml.tokens", gguf::Value::strings({"a"}));
    EXPECT_THROW(write_and_load(w), Error);
    w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
    try {
        write_and_load(w);
        ADD_FAILURE() << "a BPE vocabulary without merges must not load";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("merges"), std::string::npos) << e.what();
    }
    gguf::Writer ok;
    ok.set("tokenizer.ggml.model", gguf::Value::string("llama"));
    ok.set("tokenizer.ggml.tokens", gguf::Value::strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81" "h", "i", "\xE2\x96\x81" "hi"}));
    ok.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0xFFFFFFFFu));  // "none", as stories260K stores it
    ok.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(true));
    auto tok = write_and_load(ok);
    EXPECT_EQ(tok->vocab().pad(), kNoToken);
    EXPECT_EQ(tok->encode("hi"), (std::vector<int32_t>{1, 5}));
    ok.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(7));
    EXPECT_THROW(write_and_load(ok), Error);
}

TEST(Tokenizer, SpecialTokensParsedOnlyWhenAskedUserDefinedAlways) {
    auto tok = Tokenizer::from_vocab(Vocab::from_spec(small_spm()));
    EncodeOptions plain{.add_bos = false};
    // "<tool>" is user-defined: always matched. "<s>" is control: only with parse_special.
    auto ids = tok->encode("a<tool>a", plain);
    // "▁a", <tool>, then a dummy space again after the special token: "▁a".
    EXPECT_EQ(ids, (std::vector<int32_t>{6, 9, 6}));
    auto parsed = tok->encode("<s>ab", EncodeOptions{.add_bos = false, .parse_special = true});
    EXPECT_EQ(parsed, (std::vector<int32_t>{1, 3, 7}));
    auto unparsed = tok->encode("<s>", plain);
    EXPECT_EQ(std::count(unparsed.begin(), unparsed.end(), 1), 0);
    // Byte fallback for characters that are not in the vocabulary: "▁" then 'A' as <0x41>; 'Z' has no
    // byte token here, so it becomes <unk>.
    EXPECT_EQ(tok->encode("A", plain), (std::vector<int32_t>{3, 10}));
    EXPECT_EQ(tok->encode("Z", plain), (std::vector<int32_t>{3, 0}));
    EXPECT_EQ(tok->encode("", plain), std::vector<int32_t>{});
    EXPECT_EQ(tok->encode(""), std::vector<int32_t>{1});
    EXPECT_EQ(tok->encode("a", EncodeOptions{.add_eos = true}), (std::vector<int32_t>{1, 6, 2}));
}

TEST(Tokenizer, DecodeRendersTokenTypes) {
    auto tok = Tokenizer::from_vocab(Vocab::from_spec(small_spm()));
    EXPECT_EQ(tok->token_to_piece(6), " a");
    EXPECT_EQ(tok->token_to_piece(10), "A");
    EXPECT_EQ(tok->token_to_piece(1), "");
    EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
    EXPECT_EQ(tok->token_to_piece(9), "<tool>");
    EXPECT_EQ(tok->decode({1, 6, 7, 2}), "aab");
    EXPECT_EQ(tok->decode({1, 6, 7, 2}, {.render_special = true}), "<s> aab</s>");
    EXPECT_THROW(tok->token_to_piece(11), Error);
    EXPECT_THROW(tok->token_to_piece(-1), Error);

    auto bpe = Tokenizer::from_vocab(Vocab::from_spec(small_bpe()));
    EXPECT_EQ(bpe->encode("a a"), (std::vector<int32_t>{'a', 256}));
    EXPECT_EQ(bpe->decode({'a', 256, 257}), "a a");
    EXPECT_TRUE(bpe->is_eog(257));
    EXPECT_EQ(bpe->encode("<|im_start|>a", EncodeOptions{.parse_special = true}).front(), 258);
}

TEST(Tokenizer, FixtureVocabularyFacts) {
    PAGODA_REQUIRE_FIXTURE(vocab_path("phi-3"));
    const Tokenizer* phi3 = fixture_tokenizer("phi-3");
    EXPECT_EQ(phi3->eos(), 32000);
    EXPECT_TRUE(phi3->is_eog(32007));  // <|end|>
    EXPECT_TRUE(phi3->is_eog(32000));  // <|endoftext|>
    EXPECT_FALSE(phi3->is_eog(32010)); // <|user|>
    EXPECT_EQ(phi3->encode("<|user|>\nHi<|end|>", EncodeOptions{.add_bos = true, .parse_special = true}).front(), 1);
    // Phi-3's special tokens eat the whitespace after them (rstrip), then the dummy prefix applies:
    // "<|user|> Hi" -> <|user|> "▁Hi" (6324), not "▁▁Hi".
    EXPECT_EQ(phi3->encode("<|user|> Hi", EncodeOptions{.add_bos = false, .parse_special = true}),
              (std::vector<int32_t>{32010, 6324}));
    const Tokenizer* gpt2 = fixture_tokenizer("gpt-2");
    ASSERT_NE(gpt2, nullptr);
    EXPECT_FALSE(gpt2->vocab().add_bos());
    EXPECT_TRUE(gpt2->is_eog(50256));
    EXPECT_EQ(gpt2->encode("<|endoftext|>", EncodeOptions{.parse_special = true}), (std::vector<int32_t>{50256}));
    EXPECT_NE(gpt2->encode("<|endoftext|>"), (std::vector<int32_t>{50256}));
    const Tokenizer* coder = fixture_tokenizer("deepseek-coder");
    ASSERT_NE(coder, nullptr);
    EXPECT_TRUE(coder->vocab().add_bos());
    EXPECT_EQ(coder->bos(), 32013);
    EXPECT_TRUE(coder->is_eog(32014));
}

}  // namespace
}  // namespace pagoda::test
