// The character classes and lowercase mapping the BERT pipeline uses (unicode_props.h), on code points
// whose Unicode properties are known, and NFD (unicode_nfc.h) decomposing without composing.
#include <gtest/gtest.h>

#include "tokenizer/charsmap.h"
#include "tokenizer/grapheme.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/unicode_props.h"

namespace pagoda::test {
namespace {

using namespace pagoda::tokenizer;

std::vector<char32_t> lower(char32_t cp) {
    std::vector<char32_t> out;
    append_lowercase(out, cp);
    return out;
}

TEST(UnicodeProps, Classes) {
    for (char32_t cp : {U' ', U'\t', U'\n', U'\r', U'\u00A0', U'\u3000', U'\u2009', U'\u0085', U'\u2028'})
        EXPECT_TRUE(is_white_space(cp)) << std::hex << uint32_t(cp);
    for (char32_t cp : {U'a', U'\u200B', U'\u001F', U'\u00AD'}) EXPECT_FALSE(is_white_space(cp)) << std::hex << uint32_t(cp);
    for (char32_t cp : {U'\u0301', U'\u0308', U'\u0323', U'\u064B'}) EXPECT_TRUE(is_nonspacing_mark(cp)) << std::hex << uint32_t(cp);
    EXPECT_FALSE(is_nonspacing_mark(U'\u0903')) << "Mc, a spacing mark";
    for (char32_t cp : {U'!', U',', U'\u00BF', U'\u2014', U'\u3001', U'\uFF0C', U'\u00AB', U'_'})
        EXPECT_TRUE(is_punctuation(cp)) << std::hex << uint32_t(cp);
    for (char32_t cp : {U'$', U'+', U'^', U'`', U'|', U'~', U'\u20AC'})
        EXPECT_FALSE(is_punctuation(cp)) << std::hex << uint32_t(cp) << " is a symbol (S*)";
    for (char32_t cp : {U'$', U'+', U'^', U'`', U'|', U'~'}) EXPECT_TRUE(is_bert_punctuation(cp)) << "ASCII punctuation";
    EXPECT_FALSE(is_bert_punctuation(U'\u20AC')) << "€ is a symbol outside ASCII";
    for (char32_t cp : {U'\u0001', U'\u007F', U'\u0085', U'\u200B', U'\u00AD', U'\uE000', char32_t(0x0378), char32_t(0xD800)})
        EXPECT_TRUE(is_other(cp)) << std::hex << uint32_t(cp);
    for (char32_t cp : {U'a', U' ', U'\u4E2D', U'\u0301'}) EXPECT_FALSE(is_other(cp)) << std::hex << uint32_t(cp);
    EXPECT_TRUE(is_cjk_ideograph(U'\u4E2D'));
    EXPECT_TRUE(is_cjk_ideograph(char32_t(0x20000)));
    EXPECT_FALSE(is_cjk_ideograph(U'\u3042')) << "hiragana is not in BERT's list";
}

TEST(UnicodeProps, Lowercase) {
    EXPECT_EQ(lower(U'A'), std::vector<char32_t>{U'a'});
    EXPECT_EQ(lower(U'\u00C9'), std::vector<char32_t>{U'\u00E9'});
    EXPECT_EQ(lower(U'\u0130'), (std::vector<char32_t>{U'i', U'\u0307'})) << "the full (SpecialCasing) mapping";
    EXPECT_EQ(lower(U'\u03A3'), std::vector<char32_t>{U'\u03C3'}) << "no final-sigma context per code point";
    EXPECT_EQ(lower(U'\u01C5'), std::vector<char32_t>{U'\u01C6'}) << "titlecase Dž";
    EXPECT_EQ(lower(U'\u1E9E'), std::vector<char32_t>{U'\u00DF'});
    EXPECT_EQ(lower(U'\u00DF'), std::vector<char32_t>{U'\u00DF'});
    EXPECT_EQ(lower(U'\u4E2D'), std::vector<char32_t>{U'\u4E2D'});
}

TEST(UnicodeProps, Nfd) {
    EXPECT_EQ(nfd({U'\u00E9'}), (std::vector<char32_t>{U'e', U'\u0301'}));
    EXPECT_EQ(nfd({U'\u1EC7'}), (std::vector<char32_t>{U'e', U'\u0323', U'\u0302'})) << "nested, canonically ordered";
    EXPECT_EQ(nfd({U'e', U'\u0302', U'\u0323'}), (std::vector<char32_t>{U'e', U'\u0323', U'\u0302'}));
    EXPECT_EQ(nfd({U'\uD55C'}), (std::vector<char32_t>{U'\u1112', U'\u1161', U'\u11AB'})) << "Hangul by arithmetic";
    EXPECT_EQ(nfd({U'a'}), std::vector<char32_t>{U'a'});
}

}  // namespace
}  // namespace pagoda::test

namespace pagoda::test {
namespace {

std::vector<std::string> clusters(std::string_view text) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = tokenizer::grapheme_end(text, pos);
        out.emplace_back(text.substr(pos, end - pos));
        pos = end;
    }
    return out;
}

// A sample of UAX #29's rules (scripts/gen_unicode_props.py's tables pass all 602 cases of Unicode's
// GraphemeBreakTest.txt; that file is not a build dependency).
TEST(Graphemes, ExtendedClusters) {
    using V = std::vector<std::string>;
    EXPECT_EQ(clusters("ab"), (V{"a", "b"}));
    EXPECT_EQ(clusters("\r\n\n"), (V{"\r\n", "\n"})) << "GB3, GB4";
    EXPECT_EQ(clusters("e\xCC\x81\xCC\xA3x"), (V{"e\xCC\x81\xCC\xA3", "x"})) << "GB9: marks extend";
    EXPECT_EQ(clusters("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), (V{"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"})) << "GB6-8: L V T";
    EXPECT_EQ(clusters("\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\xF0\x9F\x87\xA9"),
              (V{"\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7", "\xF0\x9F\x87\xA9"})) << "GB12/13: regional indicators pair up";
    EXPECT_EQ(clusters("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB!"), (V{"\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB", "!"}))
        << "GB11: an emoji ZWJ sequence";
    EXPECT_EQ(clusters("a\xE2\x80\x8D\xF0\x9F\x92\xBB"), (V{"a\xE2\x80\x8D", "\xF0\x9F\x92\xBB"})) << "ZWJ after a letter";
    EXPECT_EQ(clusters("\xFF\xCC\x81"), (V{"\xFF", "\xCC\x81"})) << "an invalid byte stands alone";
}

TEST(Graphemes, CharsmapPerCluster) {
    const tokenizer::Charsmap map(tokenizer::build_charsmap({{"e\xCC\x81", "\xC3\xA9"}, {"ab", "X"}, {"e", "E"}}));
    // SentencePiece: longest key at each position; Hugging Face: per cluster, the shortest key that
    // prefixes it replaces the whole cluster, keys spanning clusters never apply.
    EXPECT_EQ(map.normalize("e\xCC\x81\xCC\xA3"), "\xC3\xA9\xCC\xA3");
    EXPECT_EQ(map.normalize_graphemes("e\xCC\x81\xCC\xA3"), "E") << "the shortest key 'e' replaces the whole cluster";
    EXPECT_EQ(map.normalize("ab"), "X");
    EXPECT_EQ(map.normalize_graphemes("ab"), "ab");
    EXPECT_EQ(map.normalize_graphemes("xe"), "xE");
    // A cluster of 6 bytes or more is looked up character by character.
    EXPECT_EQ(map.normalize_graphemes("e\xCC\x81\xCC\x81\xCC\x81"), "E\xCC\x81\xCC\x81\xCC\x81");
    EXPECT_EQ(map.normalize_graphemes("\xFFq"), "\xEF\xBF\xBDq");
}

}  // namespace
}  // namespace pagoda::test
