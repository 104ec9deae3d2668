// Hugging Face tokenizer files of encoder models (tests/data/hf_tokenizer/bert-tiny: BertNormalizer,
// BertPreTokenizer, WordPiece, BertProcessing; xlmr-tiny: Precompiled + Replace, Metaspace, Unigram
// with byte fallback, RobertaProcessing; both hand-written in their families' structure) read into
// the expected spec, encoded with known ids, written back and read again, and the refusals of the
// steps pagoda does not reproduce.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using tokenizer::HfTokenizer;
using tokenizer::Tokenizer;
using tokenizer::TokenType;
using tokenizer::Vocab;
using Ids = std::vector<int32_t>;

HfTokenizer read(const std::string& folder) {
    return tokenizer::read_hf_tokenizer(source_dir() + "/tests/data/hf_tokenizer/" + folder);
}
std::unique_ptr<Tokenizer> make(const HfTokenizer& hf) { return Tokenizer::from_vocab(Vocab::from_spec(hf.spec)); }

TEST(HfEncoderParse, BertWordPiece) {
    const HfTokenizer hf = read("bert-tiny");
    EXPECT_EQ(hf.spec.model, "bert");
    EXPECT_EQ(hf.spec.continuing_prefix, std::optional<std::string>("##"));
    EXPECT_EQ(hf.spec.word_prefix, std::optional<std::string>(""));
    EXPECT_EQ(hf.spec.lowercase, std::optional<bool>(true));
    EXPECT_EQ(hf.spec.strip_accents, std::optional<bool>(true)) << "null follows lowercase";
    EXPECT_EQ(hf.spec.max_input_chars_per_word, std::optional<int64_t>(100));
    EXPECT_EQ(hf.spec.unk, std::optional<int64_t>(1));
    EXPECT_EQ(hf.spec.cls, std::optional<int64_t>(2));
    EXPECT_EQ(hf.spec.sep, std::optional<int64_t>(3));
    EXPECT_EQ(hf.spec.mask, std::optional<int64_t>(12));
    EXPECT_EQ(hf.spec.add_sep, std::optional<bool>(true));
    EXPECT_EQ(hf.spec.add_eos, std::optional<bool>(false));
    EXPECT_EQ(TokenType(hf.spec.token_types[1]), TokenType::unknown);
    auto tok = make(hf);
    EXPECT_EQ(tok->encode("Hello WORLDS, unaff \xC3\x89"), (Ids{2, 4, 6, 5, 7, 10, 11, 1, 3})) << "É: é, stripped to e: [UNK]";
    const tokenizer::PairEncoding pair = tok->encode_pair("hello", "world");
    EXPECT_EQ(pair.ids, (Ids{2, 4, 3, 6, 3}));
    EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 1, 1}));
    EXPECT_EQ(tok->decode(tok->encode("hellos, world")), "hellos , world");
}

TEST(HfEncoderParse, XlmRobertaUnigram) {
    const HfTokenizer hf = read("xlmr-tiny");
    EXPECT_EQ(hf.spec.model, "t5");
    EXPECT_FALSE(hf.spec.precompiled_charsmap.empty());
    EXPECT_TRUE(hf.spec.collapse_spaces);
    EXPECT_EQ(hf.spec.prepend_scheme, "always");
    EXPECT_TRUE(hf.spec.split_words);
    EXPECT_TRUE(hf.spec.byte_fallback);
    EXPECT_EQ(hf.spec.unk, std::optional<int64_t>(3));
    EXPECT_EQ(hf.spec.scores.at(5), -1.0f);
    EXPECT_EQ(TokenType(hf.spec.token_types[9]), TokenType::byte);
    auto tok = make(hf);
    // Ａ -> a by the charsmap; "  " collapses; ﬁ -> fi; A and 0xE4 have byte pieces, Z none.
    EXPECT_EQ(tok->encode("\xEF\xBC\xA1  a"), (Ids{0, 5, 5, 2}));
    EXPECT_EQ(tok->encode("\xEF\xAC\x81", {.add_bos = false, .add_eos = false}), (Ids{8}));
    EXPECT_EQ(tok->encode("A", {.add_bos = false, .add_eos = false}), (Ids{4, 9})) << "▁ then <0x41>";
    EXPECT_EQ(tok->encode("Z", {.add_bos = false, .add_eos = false}), (Ids{4, 3}));
    const tokenizer::PairEncoding pair = tok->encode_pair("a", "b");
    EXPECT_EQ(pair.ids, (Ids{0, 5, 2, 2, 4, 7, 2}));
    EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(tok->decode(tok->encode("a b")), "a b");
}

TEST(HfEncoderParse, WrittenBackReadsTheSame) {
    for (const char* folder : {"bert-tiny", "xlmr-tiny"}) {
        const HfTokenizer hf = read(folder);
        const tokenizer::HfTokenizerFiles files = tokenizer::render_hf_tokenizer(hf.spec, "");
        const HfTokenizer again = tokenizer::parse_hf_tokenizer(files.tokenizer_json, files.tokenizer_config_json, folder);
        EXPECT_EQ(again.spec.tokens, hf.spec.tokens) << folder;
        auto a = make(hf), b = make(again);
        for (const char* text : {"Hello worlds, unaff \xC3\xA9 \xE4\xB8\xAD", "\xEF\xBC\xA1  a b A Z", "a"}) {
            EXPECT_EQ(b->encode(text), a->encode(text)) << folder << ": " << text;
            EXPECT_EQ(b->encode_pair(text, "a").type_ids, a->encode_pair(text, "a").type_ids) << folder;
        }
    }
}

std::string error_of(const std::string& folder, const std::string& from, const std::string& to) {
    std::string json = tokenizer::render_hf_tokenizer(read(folder).spec, "").tokenizer_json;
    const size_t at = json.find(from);
    if (at == std::string::npos) return "(pattern not found: " + from + ")";
    json.replace(at, from.size(), to);
    try {
        tokenizer::parse_hf_tokenizer(json, "", "m");
        return "(no error)";
    } catch (const Error& e) {
        return e.what();
    }
}

#define EXPECT_REFUSED(folder, from, to, fragment)                                     \
    do {                                                                               \
        const std::string what = error_of(folder, from, to);                           \
        EXPECT_NE(what.find(fragment), std::string::npos) << "error was: " << what;  \
    } while (0)

TEST(HfEncoderParse, Refusals) {
    EXPECT_REFUSED("bert-tiny", R"("type": "BertPreTokenizer")", R"("type": "Whitespace")", "pre-tokenizer type 'Whitespace'");
    EXPECT_REFUSED("bert-tiny", R"("pre_tokenizer": {
    "type": "BertPreTokenizer"
  })", R"("pre_tokenizer": null)", "needs a BertPreTokenizer");
    EXPECT_REFUSED("bert-tiny", R"("prefix": "##")", R"("prefix": "@@")", "differs from the model's continuing_subword_prefix");
    EXPECT_REFUSED("bert-tiny", R"("max_input_chars_per_word": 100)", R"("max_input_chars_per_word": 0)", "max_input_chars_per_word");
    EXPECT_REFUSED("bert-tiny", R"("unk_token": "[UNK]")", R"("unk_token": "[NOPE]")", "'[NOPE]' is not a token");
    EXPECT_REFUSED("xlmr-tiny", R"("type": "Precompiled")", R"("type": "NFKC")", "normalizer type 'NFKC'");
    EXPECT_REFUSED("xlmr-tiny", R"("precompiled_charsmap": ")", R"("precompiled_charsmap": "*)", "not valid base64");
    EXPECT_REFUSED("xlmr-tiny", R"("precompiled_charsmap": ")", R"("precompiled_charsmap": "AAAA)", "precompiled charsmap");
    EXPECT_REFUSED("xlmr-tiny", R"("Regex": " {2,}")", R"("Regex": " +")", "Replace of ' +'");
    EXPECT_REFUSED("xlmr-tiny", R"("pre_tokenizer": {
    "type": "Metaspace")", R"("pre_tokenizer": null, "y": {
    "type": "Metaspace")", "needs a Metaspace pre-tokenizer");
    EXPECT_REFUSED("xlmr-tiny", R"("pre_tokenizer": {
    "type": "Metaspace")", R"("pre_tokenizer": {"type": "BertPreTokenizer"}, "y": {
    "type": "Metaspace")", "a Unigram model takes");
    EXPECT_REFUSED("xlmr-tiny", R"("unk_id": 3)", R"("unk_id": 99)", "99 is not a token id");
    EXPECT_REFUSED("xlmr-tiny", R"("vocab": [)", R"("vocab": [["x"], )", "[piece, score] pair");
}

}  // namespace
}  // namespace pagoda::test
