// Unigram (SentencePiece unigram: XLM-R, T5) on hand-made vocabularies with known ids and scores:
// Viterbi segmentation and its ties, unknown characters (fused) and byte fallback, Metaspace's prepend
// schemes and split, SentencePiece's whitespace rules (GGUF), a hand-built precompiled charsmap,
// XLM-R's pair template, decoding, the GGUF keys round trip and refused malformed charsmaps.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/random_vocab.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unigram.h"

namespace pagoda::test {
namespace {

using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;
using tokenizer::TokenType;
using tokenizer::Vocab;
using tokenizer::VocabSpec;
using Ids = std::vector<int32_t>;

constexpr EncodeOptions kPlain{.add_bos = false, .add_eos = false, .parse_special = false};
const std::string kS = "\xE2\x96\x81";  // U+2581

// <s>0 <pad>1 </s>2 <unk>3 ▁4 ▁a5 a6 b7 ab8 ▁ab9 c10 ▁b11 <0x78>12 <0x79>13 ▁c14
VocabSpec hand_spec() {
    VocabSpec s;
    s.model = "t5";
    s.tokens = {"<s>", "<pad>", "</s>", "<unk>", kS, kS + "a", "a", "b", "ab", kS + "ab", "c", kS + "b", "<0x78>", "<0x79>", kS + "c"};
    s.scores = {0, 0, 0, 0, -4, -1, -2, -1, -2.5f, -3, -2, -1.5f, -1, -1, -5};
    s.token_types.assign(s.tokens.size(), int64_t(TokenType::normal));
    for (int i : {0, 1, 2}) s.token_types[size_t(i)] = int64_t(TokenType::control);
    s.token_types[3] = int64_t(TokenType::unknown);
    s.token_types[12] = s.token_types[13] = int64_t(TokenType::byte);
    s.bos = 0, s.pad = 1, s.eos = 2, s.unk = 3;
    s.add_bos = s.add_eos = true;
    s.prepend_scheme = "always";
    s.split_words = true;
    s.add_space_prefix = true;
    return s;
}

std::unique_ptr<Tokenizer> make(const VocabSpec& spec) { return Tokenizer::from_vocab(Vocab::from_spec(spec)); }

TEST(Unigram, ViterbiPicksTheBestTotalScore) {
    auto tok = make(hand_spec());
    // ▁ab: ▁a + b = -2 beats ▁ab = -3 and ▁ + ab = -6.5.
    EXPECT_EQ(tok->encode("ab", kPlain), (Ids{5, 7}));
    EXPECT_EQ(tok->encode("ab b", kPlain), (Ids{5, 7, 11}));
    EXPECT_EQ(tok->encode("cab", kPlain), (Ids{14, 8})) << "▁c + ab = -7.5 beats ▁c a b = -8 and ▁ c ab = -8.5";
}

TEST(Unigram, TiesKeepTheLongestLastPiece) {
    VocabSpec s = hand_spec();
    s.scores[9] = -2;  // ▁ab now ties ▁a + b
    EXPECT_EQ(make(s)->encode("ab", kPlain), (Ids{9})) << "the candidate found first (earliest start) is kept";
}

TEST(Unigram, UnknownCharactersFuseAndFallBackToBytes) {
    auto tok = make(hand_spec());
    EXPECT_EQ(tok->encode("xyz", kPlain), (Ids{4, 3})) << "▁ then one [unk] for the three unknown characters";
    EXPECT_EQ(tok->encode("axyb", kPlain), (Ids{5, 3, 7}));
    VocabSpec s = hand_spec();
    s.byte_fallback = true;
    auto bytes = make(s);
    EXPECT_EQ(bytes->encode("axyb", kPlain), (Ids{5, 12, 13, 7})) << "x and y as <0x78> <0x79>";
    EXPECT_EQ(bytes->encode("axzb", kPlain), (Ids{5, 3, 7})) << "no <0x7A>: the fused piece stays [unk]";
}

TEST(Unigram, PrependSchemesAndSplit) {
    VocabSpec s = hand_spec();
    s.tokens.push_back("<sep>");
    s.scores.push_back(0);
    s.token_types.push_back(int64_t(TokenType::control));
    auto always = make(s);
    EXPECT_EQ(always->encode("a<sep>a", {.add_bos = false, .add_eos = false, .parse_special = true}), (Ids{5, 15, 5}));
    EXPECT_EQ(always->encode(" a", kPlain), (Ids{5})) << "no second ▁ before text that starts with a space";
    s.prepend_scheme = "first";
    EXPECT_EQ(make(s)->encode("a<sep>a", {.add_bos = false, .add_eos = false, .parse_special = true}), (Ids{5, 15, 6}));
    s.prepend_scheme = "never";
    EXPECT_EQ(make(s)->encode("a b", kPlain), (Ids{6, 11}));
    s = hand_spec();
    s.split_words = false;
    s.tokens.push_back("a" + kS + "b");  // a piece across a space only counts without split
    s.scores.push_back(-0.5f);
    s.token_types.push_back(int64_t(TokenType::normal));
    EXPECT_EQ(make(s)->encode("ca b", kPlain), (Ids{14, 15}));
    s.split_words = true;
    EXPECT_EQ(make(s)->encode("ca b", kPlain), (Ids{14, 6, 11}));
}

TEST(Unigram, CollapseSpaces) {
    VocabSpec s = hand_spec();
    EXPECT_EQ(make(s)->encode("a  b", kPlain), (Ids{5, 4, 11}));
    s.collapse_spaces = true;
    EXPECT_EQ(make(s)->encode("a  b", kPlain), (Ids{5, 11}));
}

TEST(Unigram, SentencePieceWhitespaceRulesForGguf) {
    VocabSpec s = hand_spec();
    s.prepend_scheme.clear();  // a GGUF vocabulary: SentencePiece's dummy prefix, as llama.cpp applies it
    s.split_words = false;
    const Vocab v = Vocab::from_spec(s);
    tokenizer::UnigramEncoder enc(v);
    EXPECT_EQ(enc.normalize("  a b ", true), kS + kS + kS + "a" + kS + "b" + kS);
    s.remove_extra_whitespaces = true;
    const Vocab trimmed = Vocab::from_spec(s);
    tokenizer::UnigramEncoder enc2(trimmed);
    EXPECT_EQ(enc2.normalize("  a   b ", true), kS + "a" + kS + "b");
    s.add_space_prefix = false;
    const Vocab no_prefix = Vocab::from_spec(s);
    EXPECT_EQ(tokenizer::UnigramEncoder(no_prefix).normalize("  a   b ", true), "a" + kS + "b");
}

TEST(Unigram, LlamaCppT5Defaults) {
    VocabSpec s;
    s.model = "t5";
    s.tokens = {"<pad>", "</s>", "<unk>", kS + "hi", kS};
    s.scores = {0, 0, 0, -1, -2};
    const Vocab v = Vocab::from_spec(s);
    EXPECT_EQ(v.pad(), 0);
    EXPECT_EQ(v.eos(), 1);
    EXPECT_EQ(v.unk(), 2);
    EXPECT_EQ(v.bos(), tokenizer::kNoToken);
    auto tok = Tokenizer::from_vocab(v);
    EXPECT_EQ(tok->encode("hi"), (Ids{3, 1})) << "T5 adds </s>, no BOS";
}

TEST(Unigram, CharsmapLongestMatch) {
    const std::string blob = tokenizer::build_charsmap({{"a", "b"}, {"ab", "c"}, {"\xEF\xBC\xA1", "A"}, {"\t", " "}, {"x", ""}});
    const tokenizer::Charsmap map(blob);
    EXPECT_EQ(map.normalize("aab"), "bc") << "the longest key at each position";
    EXPECT_EQ(map.normalize("\xEF\xBC\xA1z"), "Az");
    EXPECT_EQ(map.normalize("x\tq"), " q") << "a key may map to nothing";
    EXPECT_EQ(map.normalize("\xFFq\xC3"), "\xEF\xBF\xBDq\xEF\xBF\xBD") << "invalid bytes become U+FFFD";
    EXPECT_EQ(map.normalize("\xC3\xA9"), "\xC3\xA9");
}

TEST(Unigram, CharsmapInTheVocabulary) {
    VocabSpec s = hand_spec();
    s.precompiled_charsmap = tokenizer::build_charsmap({{"\xEF\xBC\xA1", "a"}, {"B", "b"}, {"\xE3\x80\x80", " "}});
    auto tok = make(s);
    EXPECT_EQ(tok->encode("\xEF\xBC\xA1" "B\xE3\x80\x80" "B", kPlain), (Ids{5, 7, 11})) << "Ａ→a, B→b, U+3000→space";
}

TEST(Unigram, CharsmapRefusesMalformedBlobs) {
    EXPECT_THROW(tokenizer::Charsmap(std::string("\x01\x00", 2)), Error);
    EXPECT_THROW(tokenizer::Charsmap(std::string("\x40\x00\x00\x00", 4) + std::string(8, '\0')), Error) << "array past the end";
    EXPECT_THROW(tokenizer::Charsmap(std::string("\x03\x00\x00\x00", 4) + std::string(8, '\0')), Error) << "not a multiple of 4";
    // A valid array whose leaf points past the strings: refused when it is used, not read out of bounds.
    std::string blob = tokenizer::build_charsmap({{"a", "b"}});
    blob.resize(blob.size() - 2);  // drop "b\0"
    const tokenizer::Charsmap map(blob);
    EXPECT_THROW(map.normalize("a"), Error);
    EXPECT_EQ(map.normalize("q"), "q");
    VocabSpec s = hand_spec();
    s.precompiled_charsmap = "xx";
    EXPECT_THROW(Vocab::from_spec(s), Error);
}

TEST(Unigram, PairsAndDecode) {
    auto tok = make(hand_spec());
    EXPECT_EQ(tok->encode("ab"), (Ids{0, 5, 7, 2}));
    const tokenizer::PairEncoding pair = tok->encode_pair("ab", "c");
    EXPECT_EQ(pair.ids, (Ids{0, 5, 7, 2, 2, 14, 2})) << "XLM-R: <s> a </s></s> b </s>";
    EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 0, 0, 0, 0}));
    const Ids ids = tok->encode("ab b c");
    EXPECT_EQ(tok->decode(ids), "ab b c");
    tokenizer::StreamDecoder stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.feed(id);
    EXPECT_EQ(streamed + stream.flush(), "ab b c");
    VocabSpec s = hand_spec();
    s.byte_fallback = true;
    EXPECT_EQ(make(s)->decode(make(s)->encode("axy")), "axy") << "byte tokens decode to their bytes";
}

TEST(Unigram, GgufKeysRoundTrip) {
    VocabSpec s = hand_spec();
    s.precompiled_charsmap = tokenizer::build_charsmap({{"B", "b"}});
    s.collapse_spaces = true;
    s.byte_fallback = true;
    gguf::Writer w;
    for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(s, "")) w.set(key, value);
    const std::string path = ::testing::TempDir() + "/unigram_keys.gguf";
    w.write(path);
    auto file = gguf::File::open(path);
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "t5");
    const VocabSpec back = tokenizer::vocab_spec_from_gguf(*file);
    EXPECT_EQ(back.precompiled_charsmap, s.precompiled_charsmap);
    EXPECT_EQ(back.prepend_scheme, "always");
    EXPECT_TRUE(back.split_words);
    EXPECT_TRUE(back.collapse_spaces);
    EXPECT_TRUE(back.byte_fallback);
    auto a = make(s), b = Tokenizer::from_gguf(*file);
    for (const char* text : {"AB  b xy", " c a", "Bab"}) EXPECT_EQ(b->encode(text), a->encode(text)) << text;
}

TEST(Unigram, RandomSpecIsDeterministicAndEncodesAscii) {
    const VocabSpec a = tokenizer::make_random_unigram_spec(300, 3);
    EXPECT_EQ(a.tokens, tokenizer::make_random_unigram_spec(300, 3).tokens);
    EXPECT_EQ(a.scores, tokenizer::make_random_unigram_spec(300, 3).scores);
    EXPECT_EQ(a.tokens.size(), 300u);
    auto tok = make(a);
    const Ids ids = tok->encode("some text, with 9 words!", kPlain);
    for (int32_t id : ids) EXPECT_NE(id, 3) << "no <unk> for lowercase ASCII";
    EXPECT_EQ(tok->decode(ids), "some text, with 9 words!");
    EXPECT_EQ(tok->encode("Q", kPlain), (Ids{4, 3})) << "capitals are not pieces";
}

}  // namespace
}  // namespace pagoda::test

namespace pagoda::test {
namespace {

// decode(encode(x)) == x where the normalizer is the identity: Unigram with no charsmap and byte
// fallback over all 256 bytes (every character is representable), text not starting with a space
// (Metaspace's prefix is stripped once) and without U+2581 (which decodes as a space, as in
// SentencePiece); WordPiece with the BERT normalizer switched off, words of
// vocabulary characters joined by single spaces (its pre-tokenizer drops the spaces).
TEST(EncoderRoundTrip, IdentityNormalizers) {
    std::mt19937 rng(5);
    const std::vector<std::string> pool = {"a", "b", "ab", "z", " ", "  ", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
                                           "\t", "\n", "<s>", "x y", "!", "\xD0\x96"};
    VocabSpec u = tokenizer::make_random_unigram_spec(300, 9);
    u.byte_fallback = true;
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        u.tokens.push_back(hex);
        u.scores.push_back(-20);
        u.token_types.push_back(int64_t(TokenType::byte));
    }
    auto uni = make(u);
    VocabSpec w = tokenizer::make_random_wordpiece_spec(300, 9);
    w.lowercase = w.strip_accents = w.clean_text = w.handle_chinese_chars = false;
    auto wp = make(w);
    for (int i = 0; i < 300; ++i) {
        std::string text = "q";
        for (int k = rng() % 12; k > 0; --k) text += pool[rng() % pool.size()];
        EXPECT_EQ(uni->decode(uni->encode(text)), text);
        std::string words;
        for (int k = 1 + rng() % 6; k > 0; --k) {
            if (!words.empty()) words += ' ';
            for (int c = 1 + rng() % 8; c > 0; --c) words += char('a' + rng() % 26);
        }
        EXPECT_EQ(wp->decode(wp->encode(words)), words);
    }
}

}  // namespace
}  // namespace pagoda::test
