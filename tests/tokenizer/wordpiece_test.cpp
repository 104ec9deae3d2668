// WordPiece (BERT) on hand-made vocabularies with known ids: the BERT normalizer (lowercase, accents,
// Chinese characters, cleaning), punctuation splitting, "##" continuations, max_input_chars_per_word,
// [CLS]/[SEP] and pair encoding with type ids, both spellings (Hugging Face's "##" and llama.cpp's
// U+2581), tokenizer.json reading, the GGUF keys round trip, decoding and streaming.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/random_vocab.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;
using tokenizer::TokenType;
using tokenizer::Vocab;
using tokenizer::VocabSpec;
using Ids = std::vector<int32_t>;

constexpr EncodeOptions kPlain{.add_bos = false, .add_eos = false, .parse_special = false};

// ids: [PAD]0 [UNK]1 [CLS]2 [SEP]3 [MASK]4 hello5 world6 ##s7 un8 ##aff9 ##able10 ,11 !12 cafe13 中14 国15
// e16 ##e17 é18 x19 ##x20 i̇21 (i + U+0307) the22 ##llo23 he24 .25
VocabSpec hand_spec() {
    VocabSpec s;
    s.model = "bert";
    s.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "un", "##aff", "##able", ",", "!",
                "cafe", "\xE4\xB8\xAD", "\xE5\x9B\xBD", "e", "##e", "\xC3\xA9", "x", "##x", "i\xCC\x87", "the", "##llo",
                "he", "."};
    s.token_types.assign(s.tokens.size(), int64_t(TokenType::normal));
    for (int i : {0, 2, 3, 4}) s.token_types[size_t(i)] = int64_t(TokenType::control);
    s.token_types[1] = int64_t(TokenType::unknown);
    s.unk = 1, s.cls = 2, s.sep = 3, s.pad = 0, s.mask = 4, s.bos = 2, s.eos = -1;
    s.add_bos = true, s.add_sep = true;
    s.word_prefix = "";
    s.continuing_prefix = "##";
    return s;
}

std::unique_ptr<Tokenizer> make(const VocabSpec& spec) { return Tokenizer::from_vocab(Vocab::from_spec(spec)); }

TEST(WordPiece, GreedyLongestMatchAndContinuations) {
    auto tok = make(hand_spec());
    EXPECT_EQ(tok->encode("unaffable", kPlain), (Ids{8, 9, 10}));
    EXPECT_EQ(tok->encode("hello worlds", kPlain), (Ids{5, 6, 7}));
    EXPECT_EQ(tok->encode("hellos", kPlain), (Ids{5, 7}));
    EXPECT_EQ(tok->encode("hexx", kPlain), (Ids{24, 20, 20})) << "after 'he', each x is the continuation ##x";
}

TEST(WordPiece, UnknownWordsAndPunctuation) {
    auto tok = make(hand_spec());
    // "hezz": "he" matches, then no "##z..." piece: the whole word is [UNK].
    EXPECT_EQ(tok->encode("hezz world", kPlain), (Ids{1, 6}));
    EXPECT_EQ(tok->encode("hello,world!", kPlain), (Ids{5, 11, 6, 12})) << "punctuation is a word of its own";
    EXPECT_EQ(tok->encode("hello\t\n  world ", kPlain), (Ids{5, 6}));
    EXPECT_EQ(tok->encode("hello?", kPlain), (Ids{5, 1})) << "an unknown punctuation character is one [UNK]";
    EXPECT_EQ(tok->encode("", kPlain), Ids{});
}

TEST(WordPiece, LowercaseAccentsAndChinese) {
    auto tok = make(hand_spec());
    EXPECT_EQ(tok->encode("HeLLo WORLD", kPlain), (Ids{5, 6}));
    EXPECT_EQ(tok->encode("Caf\xC3\xA9", kPlain), (Ids{13})) << "é is NFD-decomposed and its accent dropped";
    EXPECT_EQ(tok->encode("cafe\xCC\x81", kPlain), (Ids{13})) << "a combining accent is dropped";
    EXPECT_EQ(tok->encode("hello\xE4\xB8\xAD\xE5\x9B\xBDworld", kPlain), (Ids{5, 14, 15, 6})) << "CJK ideographs stand alone";
    // U+0130 lowercases to i + U+0307; strip_accents then drops U+0307 (Mn): "i", not in this vocab.
    EXPECT_EQ(tok->encode("\xC4\xB0", kPlain), (Ids{1}));
    // Cleaning: NUL, U+FFFD, a control character and a format character (ZWSP) go; NBSP is a space.
    EXPECT_EQ(tok->encode(std::string("he\0llo", 6), kPlain), (Ids{5}));
    EXPECT_EQ(tok->encode("he\x01llo\xE2\x80\x8B\xC2\xA0world\xEF\xBF\xBD", kPlain), (Ids{5, 6}));
    EXPECT_EQ(tok->encode("hel\xFFlo", kPlain), (Ids{5})) << "an invalid byte counts as U+FFFD, which clean_text drops";
}

TEST(WordPiece, NormalizerSwitches) {
    VocabSpec s = hand_spec();
    s.lowercase = false;  // strip_accents follows lowercase when unset
    auto cased = make(s);
    EXPECT_EQ(cased->encode("Hello", kPlain), (Ids{1}));
    EXPECT_EQ(cased->encode("\xC3\xA9", kPlain), (Ids{18})) << "no lowercase: accents kept too";
    s.strip_accents = true;
    EXPECT_EQ(make(s)->encode("\xC3\xA9", kPlain), (Ids{16}));
    s = hand_spec();
    s.strip_accents = false;
    EXPECT_EQ(make(s)->encode("\xC3\x89", kPlain), (Ids{18})) << "É lowercases to é, kept";
    EXPECT_EQ(make(s)->encode("\xC4\xB0", kPlain), (Ids{21})) << "U+0130 lowercases to i + U+0307 (full mapping)";
    s = hand_spec();
    s.handle_chinese_chars = false;
    EXPECT_EQ(make(s)->encode("\xE4\xB8\xAD\xE5\x9B\xBD", kPlain), (Ids{1})) << "one word, not in the vocabulary";
    s = hand_spec();
    s.clean_text = false;
    EXPECT_EQ(make(s)->encode("he\x01llo", kPlain), (Ids{1}));
}

TEST(WordPiece, MaxInputCharsPerWord) {
    VocabSpec s = hand_spec();
    s.max_input_chars_per_word = 5;
    auto tok = make(s);
    EXPECT_EQ(tok->encode("hello", kPlain), (Ids{5}));
    EXPECT_EQ(tok->encode("hellos hello", kPlain), (Ids{1, 5})) << "6 characters > 5: one [UNK]";
    EXPECT_EQ(tok->encode("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", kPlain), (Ids{16, 17, 17, 17, 17}))
        << "counted in characters (10 bytes, 5 characters)";
}

TEST(WordPiece, SpecialTokensAndPairs) {
    auto tok = make(hand_spec());
    EXPECT_EQ(tok->encode("hello world"), (Ids{2, 5, 6, 3})) << "[CLS] text [SEP] by default";
    EXPECT_EQ(tok->encode("[CLS]hello[SEP]", {.parse_special = true}), (Ids{2, 2, 5, 3, 3}));
    EXPECT_EQ(tok->encode("[MASK]", kPlain), (Ids{1, 1, 1})) << "special text is not parsed by default: [ mask ] ";
    const tokenizer::PairEncoding pair = tok->encode_pair("hello", "the world");
    EXPECT_EQ(pair.ids, (Ids{2, 5, 3, 22, 6, 3}));
    EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 1, 1, 1}));
}

TEST(WordPiece, DecodeAndStream) {
    auto tok = make(hand_spec());
    const Ids ids = tok->encode("hello worlds, unaffable!");
    EXPECT_EQ(tok->decode(ids), "hello worlds , unaffable !") << "no cleanup: words are space-separated";
    EXPECT_EQ(tok->decode(ids, {.render_special = true}), "[CLS] hello worlds , unaffable ! [SEP]");
    tokenizer::StreamDecoder stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.feed(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, tok->decode(ids));
}

// llama.cpp's spelling of the same vocabulary: "##x" -> "x", "x" -> "▁x", control tokens unchanged.
VocabSpec phantom(const VocabSpec& hf) {
    VocabSpec s = hf;
    for (size_t i = 0; i < s.tokens.size(); ++i) {
        if (s.token_types[i] == int64_t(TokenType::control) || s.token_types[i] == int64_t(TokenType::unknown)) continue;
        s.tokens[i] = s.tokens[i].starts_with("##") ? s.tokens[i].substr(2) : "\xE2\x96\x81" + s.tokens[i];
    }
    s.word_prefix.reset();
    s.continuing_prefix.reset();
    return s;
}

TEST(WordPiece, LlamaCppSpellingEncodesAlike) {
    auto hf = make(hand_spec());
    auto llama = make(phantom(hand_spec()));
    for (const char* text : {"unaffable hellos", "Caf\xC3\xA9, world!", "hezz the", "\xE4\xB8\xAD x xx"}) {
        EXPECT_EQ(llama->encode(text), hf->encode(text)) << text;
        EXPECT_EQ(llama->decode(llama->encode(text)), hf->decode(hf->encode(text))) << text;
    }
}

TEST(WordPiece, GgufKeysRoundTrip) {
    // The GGUF writer stores llama.cpp's spelling; reading it back encodes the same.
    VocabSpec s = hand_spec();
    s.max_input_chars_per_word = 7;
    s.strip_accents = false;
    gguf::Writer w;
    for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(s, "")) w.set(key, value);
    const std::string path = ::testing::TempDir() + "/wordpiece_keys.gguf";
    w.write(path);
    auto file = gguf::File::open(path);
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "bert");
    EXPECT_EQ(file->get_strings("tokenizer.ggml.tokens")[5], "\xE2\x96\x81hello");
    EXPECT_EQ(file->get_strings("tokenizer.ggml.tokens")[7], "s");
    EXPECT_EQ(file->get_int("tokenizer.ggml.cls_token_id"), 2);
    EXPECT_EQ(file->get_int("tokenizer.ggml.seperator_token_id"), 3);
    EXPECT_TRUE(file->get_bool("tokenizer.ggml.add_sep_token"));
    EXPECT_FALSE(file->get_bool("tokenizer.ggml.normalizer.strip_accents"));
    auto back = Tokenizer::from_gguf(*file);
    auto direct = make(s);
    for (const char* text : {"unaffable hellos", "\xC3\xA9 worlds", "hellos hello"})
        EXPECT_EQ(back->encode(text), direct->encode(text)) << text;
    EXPECT_EQ(back->encode_pair("a", "b").type_ids, direct->encode_pair("a", "b").type_ids);
}

TEST(WordPiece, LlamaCppDefaults) {
    // A "bert" GGUF with only tokens: llama.cpp's defaults (bert-base-uncased ids) where they exist.
    VocabSpec s;
    s.model = "bert";
    for (int i = 0; i < 110; ++i) s.tokens.push_back("[unused" + std::to_string(i) + "]");
    s.tokens[100] = "[UNK]", s.tokens[101] = "[CLS]", s.tokens[102] = "[SEP]", s.tokens[103] = "[MASK]";
    s.tokens[104] = "\xE2\x96\x81hi";
    s.tokens[105] = "ya";
    const Vocab v = Vocab::from_spec(s);
    EXPECT_EQ(v.unk(), 100);
    EXPECT_EQ(v.bos(), 101);
    EXPECT_EQ(v.cls(), 101);
    EXPECT_EQ(v.sep(), 102);
    EXPECT_EQ(v.mask(), 103);
    EXPECT_TRUE(v.add_bos());
    EXPECT_TRUE(v.add_sep());
    EXPECT_TRUE(v.bert_options().lowercase);
    EXPECT_TRUE(v.bert_options().strip_accents);
    auto tok = Tokenizer::from_vocab(v);
    EXPECT_EQ(tok->encode("Hiya hi"), (Ids{101, 104, 105, 104, 102}));
}

TEST(WordPiece, RefusesBadSpecs) {
    VocabSpec s = hand_spec();
    s.unk = -1;
    EXPECT_THROW(Vocab::from_spec(s), Error);
    s = hand_spec();
    s.continuing_prefix = "";
    EXPECT_THROW(Vocab::from_spec(s), Error) << "both prefixes empty";
    s = hand_spec();
    s.max_input_chars_per_word = 0;
    EXPECT_THROW(Vocab::from_spec(s), Error);
    s = hand_spec();
    s.pair_template = {{-1, 0, 0}, {3, 0, 0}};  // no B
    EXPECT_THROW(Vocab::from_spec(s), Error);
}

TEST(WordPiece, RandomSpecIsDeterministicAndEncodesAscii) {
    const VocabSpec a = tokenizer::make_random_wordpiece_spec(500, 7);
    const VocabSpec b = tokenizer::make_random_wordpiece_spec(500, 7);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.tokens.size(), 500u);
    EXPECT_NE(a.tokens, tokenizer::make_random_wordpiece_spec(500, 8).tokens);
    auto tok = make(a);
    const Ids ids = tok->encode("Hello, World! 42 times.", kPlain);
    for (int32_t id : ids) EXPECT_NE(id, 1) << "no [UNK]: every ASCII character is a piece";
    EXPECT_EQ(tok->decode(ids), "hello , world ! 42 times .");
    EXPECT_THROW(tokenizer::make_random_wordpiece_spec(100, 1), Error);
}

}  // namespace
}  // namespace pagoda::test

namespace pagoda::test {
namespace {

// What `gen-model` does with a synthetic encoder vocabulary: GGUF keys (llama.cpp's spelling for
// WordPiece), then for a Hugging Face folder the spec read back from them written as tokenizer.json.
// Each step must encode (and pair-encode) as the spec itself does.
TEST(EncoderVocab, RandomSpecsThroughGgufAndTokenizerJson) {
    for (const bool wordpiece : {true, false}) {
        const VocabSpec spec = wordpiece ? tokenizer::make_random_wordpiece_spec(400, 11)
                                         : tokenizer::make_random_unigram_spec(400, 11);
        gguf::Writer w;
        for (auto& [key, value] : tokenizer::vocab_spec_gguf_keys(spec, "")) w.set(key, value);
        const std::string path = ::testing::TempDir() + "/random_encoder_vocab.gguf";
        w.write(path);
        auto file = gguf::File::open(path);
        const VocabSpec from_gguf = tokenizer::vocab_spec_from_gguf(*file);
        const tokenizer::HfTokenizerFiles files = tokenizer::render_hf_tokenizer(from_gguf, "");
        const VocabSpec from_json = tokenizer::parse_hf_tokenizer(files.tokenizer_json, files.tokenizer_config_json, "x").spec;
        auto direct = make(spec), via_gguf = make(from_gguf), via_json = make(from_json);
        for (const char* text : {"hello world, this is a test!", "Mixed CASE and 123 numbers.", "  spaced   out  ", "q"}) {
            const Ids expected = direct->encode(text);
            EXPECT_EQ(via_gguf->encode(text), expected) << wordpiece << ": " << text;
            EXPECT_EQ(via_json->encode(text), expected) << wordpiece << ": " << text;
            EXPECT_EQ(via_json->encode_pair(text, "a b").ids, direct->encode_pair(text, "a b").ids) << text;
            EXPECT_EQ(via_json->encode_pair(text, "a b").type_ids, direct->encode_pair(text, "a b").type_ids) << text;
        }
    }
}

}  // namespace
}  // namespace pagoda::test
