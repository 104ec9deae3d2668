// Unicode NFC (tokenizer/unicode_nfc.h) against the Unicode Consortium's own NormalizationTest.txt
// (a sample of each part: specific cases, single characters, canonical order, PRI #29), and the
// NFC normalizer of tokenizer.json applied when tokenizing: "e" + U+0301 encodes as "é" does.
#include "tokenizer/unicode_nfc.h"

#include <gtest/gtest.h>

#include <sstream>

#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/hf_tokenizer_pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {
namespace {

// Code points written as in NormalizationTest.txt ("1E0A 0323") -> UTF-8.
std::string utf8_of(const std::string& hex) {
    std::istringstream in(hex);
    std::string out, word;
    while (in >> word) utf8_append(out, char32_t(std::stoul(word, nullptr, 16)));
    return out;
}

struct Case {
    const char* source;
    const char* nfc;
};

// Sampled from NormalizationTest.txt (Unicode 15.0.0): columns c1 (source) and c2 (NFC).
const Case kCases[] = {
    {"1E0A", "1E0A"},
    {"1E0C", "1E0C"},
    {"1E0A 0323", "1E0C 0307"},
    {"1E0C 0307", "1E0C 0307"},
    {"0044 0307 0323", "1E0C 0307"},
    {"0044 0323 0307", "1E0C 0307"},
    {"1E0A 031B", "1E0A 031B"},
    {"1E0C 031B", "1E0C 031B"},
    {"1E0A 031B 0323", "1E0C 031B 0307"},
    {"1E0C 031B 0307", "1E0C 031B 0307"},
    {"0044 031B 0307 0323", "1E0C 031B 0307"},
    {"0044 031B 0323 0307", "1E0C 031B 0307"},
    {"00C8", "00C8"},
    {"0112", "0112"},
    {"0045 0300", "00C8"},
    {"0045 0304", "0112"},
    {"1E14", "1E14"},
    {"0112 0300", "1E14"},
    {"1E14 0304", "1E14 0304"},
    {"0045 0304 0300", "1E14"},
    {"0045 0300 0304", "00C8 0304"},
    {"05B8 05B9 05B1 0591 05C3 05B0 05AC 059F", "05B1 05B8 05B9 0591 05C3 05B0 05AC 059F"},
    {"0592 05B7 05BC 05A5 05B0 05C0 05C4 05AD", "05B0 05B7 05BC 05A5 0592 05C0 05AD 05C4"},
    {"1100 AC00 11A8", "1100 AC01"},
    {"1100 AC00 11A8 11A8", "1100 AC01 11A8"},
    {"00A0", "00A0"},
    {"1E09", "1E09"},
    {"2153", "2153"},
    {"317B", "317B"},
    {"AC33", "AC33"},
    {"AE8B", "AE8B"},
    {"B0E3", "B0E3"},
    {"B33B", "B33B"},
    {"B593", "B593"},
    {"B7EB", "B7EB"},
    {"BA43", "BA43"},
    {"BC9B", "BC9B"},
    {"BEF3", "BEF3"},
    {"C14B", "C14B"},
    {"C3A3", "C3A3"},
    {"C5FB", "C5FB"},
    {"C853", "C853"},
    {"CAAB", "CAAB"},
    {"CD03", "CD03"},
    {"CF5B", "CF5B"},
    {"D1B3", "D1B3"},
    {"D40B", "D40B"},
    {"D663", "D663"},
    {"F927", "881F"},
    {"F99F", "70C8"},
    {"FA1C", "9756"},
    {"FA9D", "77A7"},
    {"FCDB", "FCDB"},
    {"FFA6", "FFA6"},
    {"1D5E2", "1D5E2"},
    {"1EE00", "1EE00"},
    {"2F849", "55B3"},
    {"2F8C1", "63A9"},
    {"2F939", "2219F"},
    {"2F9B1", "270D2"},
    {"0061 0315 0300 05AE 0300 0062", "00E0 05AE 0300 0315 0062"},
    {"0061 030C 0315 0300 05AE 0062", "01CE 05AE 0300 0315 0062"},
    {"0061 059A 0316 1DFA 0319 0062", "0061 1DFA 0316 0319 059A 0062"},
    {"0061 0325 059A 0316 1DFA 0062", "1E01 1DFA 0316 059A 0062"},
    {"0061 059A 0316 1DFA 0332 0062", "0061 1DFA 0316 0332 059A 0062"},
    {"0061 033E 0315 0300 05AE 0062", "0061 05AE 033E 0300 0315 0062"},
    {"0061 0315 0300 05AE 034B 0062", "00E0 05AE 034B 0315 0062"},
    {"0061 0358 035C 0315 0300 0062", "00E0 0358 0315 035C 0062"},
    {"0061 0315 0300 05AE 0365 0062", "00E0 05AE 0365 0315 0062"},
    {"0061 0484 0315 0300 05AE 0062", "0061 05AE 0484 0300 0315 0062"},
    {"0061 302E 059A 0316 059A 0062", "0061 0316 059A 059A 302E 0062"},
    {"0061 05A6 059A 0316 1DFA 0062", "0061 1DFA 05A6 0316 059A 0062"},
    {"0061 05B4 05B3 05B2 05B3 0062", "0061 05B2 05B3 05B3 05B4 0062"},
    {"0061 05C1 05C2 05C1 05BF 0062", "0061 05BF 05C1 05C1 05C2 0062"},
    {"0061 0619 0618 064D 0618 0062", "0061 064D 0618 0618 0619 0062"},
    {"0061 0654 0315 0300 05AE 0062", "0061 05AE 0654 0300 0315 0062"},
    {"0061 0315 0300 05AE 06D6 0062", "00E0 05AE 06D6 0315 0062"},
    {"0061 06E4 0315 0300 05AE 0062", "0061 05AE 06E4 0300 0315 0062"},
    {"0061 0315 0300 05AE 0735 0062", "00E0 05AE 0735 0315 0062"},
    {"0061 0741 0315 0300 05AE 0062", "0061 05AE 0741 0300 0315 0062"},
    {"0061 0315 0300 05AE 07EE 0062", "00E0 05AE 07EE 0315 0062"},
    {"0061 081C 0315 0300 05AE 0062", "0061 05AE 081C 0300 0315 0062"},
    {"0061 0315 0300 05AE 082B 0062", "00E0 05AE 082B 0315 0062"},
    {"0061 089E 0315 0300 05AE 0062", "0061 05AE 089E 0300 0315 0062"},
    {"0061 0315 0300 05AE 08D5 0062", "00E0 05AE 08D5 0315 0062"},
    {"0061 08E1 0315 0300 05AE 0062", "0061 05AE 08E1 0300 0315 0062"},
    {"0061 059A 0316 1DFA 08EF 0062", "0061 1DFA 0316 08EF 059A 0062"},
    {"0061 08FB 0315 0300 05AE 0062", "0061 05AE 08FB 0300 0315 0062"},
    {"0061 0315 0300 05AE 09FE 0062", "00E0 05AE 09FE 0315 0062"},
    {"0061 0CBC 3099 093C 16FF0 0062", "0061 16FF0 0CBC 093C 3099 0062"},
    {"0061 0EC8 0EB8 0E48 0EB8 0062", "0061 0E48 0EB8 0EB8 0EC8 0062"},
    {"0061 0F71 0F72 0F71 0EC8 0062", "0061 0EC8 0F71 0F71 0F72 0062"},
    {"0061 059A 0316 1DFA 0FC6 0062", "0061 1DFA 0316 0FC6 059A 0062"},
    {"0061 17DD 0315 0300 05AE 0062", "0061 05AE 17DD 0300 0315 0062"},
    {"0061 0315 0300 05AE 1A7A 0062", "00E0 05AE 1A7A 0315 0062"},
    {"0061 1AB8 059A 0316 1DFA 0062", "0061 1DFA 1AB8 0316 059A 0062"},
    {"0061 0315 0300 05AE 1AC6 0062", "00E0 05AE 1AC6 0315 0062"},
    {"0061 1B6C 059A 0316 1DFA 0062", "0061 1DFA 1B6C 0316 059A 0062"},
    {"0061 3099 093C 16FF0 1C37 0062", "0061 16FF0 093C 1C37 3099 0062"},
    {"0061 1CDC 059A 0316 1DFA 0062", "0061 1DFA 1CDC 0316 059A 0062"},
    {"0061 0315 0300 05AE 1CF4 0062", "00E0 05AE 1CF4 0315 0062"},
    {"0061 1DC9 0315 0300 05AE 0062", "0061 05AE 1DC9 0300 0315 0062"},
    {"0061 0315 0300 05AE 1DD6 0062", "00E0 05AE 1DD6 0315 0062"},
    {"0061 1DE2 0315 0300 05AE 0062", "0061 05AE 1DE2 0300 0315 0062"},
    {"0061 0315 0300 05AE 1DEF 0062", "00E0 05AE 1DEF 0315 0062"},
    {"0061 1DFB 0315 0300 05AE 0062", "0061 05AE 1DFB 0300 0315 0062"},
    {"0061 16FF0 0334 20D8 0062", "0061 0334 20D8 16FF0 0062"},
    {"0061 20EB 16FF0 0334 0062", "0061 20EB 0334 16FF0 0062"},
    {"0061 0315 0300 05AE 2DE3 0062", "00E0 05AE 2DE3 0315 0062"},
    {"0061 2DEF 0315 0300 05AE 0062", "0061 05AE 2DEF 0300 0315 0062"},
    {"0061 0315 0300 05AE 2DFC 0062", "00E0 05AE 2DFC 0315 0062"},
    {"0061 A66F 0315 0300 05AE 0062", "0061 05AE A66F 0300 0315 0062"},
    {"0061 0315 0300 05AE A6F0 0062", "00E0 05AE A6F0 0315 0062"},
    {"0061 A8E7 0315 0300 05AE 0062", "0061 05AE A8E7 0300 0315 0062"},
    {"0061 059A 0316 1DFA A92D 0062", "0061 1DFA 0316 A92D 059A 0062"},
    {"0061 AAC1 0315 0300 05AE 0062", "0061 05AE AAC1 0300 0315 0062"},
    {"0061 059A 0316 1DFA FE29 0062", "0061 1DFA 0316 FE29 059A 0062"},
    {"0061 10379 0315 0300 05AE 0062", "0061 05AE 10379 0300 0315 0062"},
    {"0061 0315 0300 05AE 10D27 0062", "00E0 05AE 10D27 0315 0062"},
    {"0061 10F4C 0315 0300 05AE 0062", "0061 05AE 10F4C 0300 0315 0062"},
    {"0061 3099 093C 16FF0 110BA 0062", "0061 16FF0 093C 110BA 3099 0062"},
    {"0061 112EA 05B0 094D 3099 0062", "0061 3099 112EA 094D 05B0 0062"},
    {"0061 0315 0300 05AE 11372 0062", "00E0 05AE 11372 0315 0062"},
    {"0061 116B7 3099 093C 16FF0 0062", "0061 16FF0 116B7 093C 3099 0062"},
    {"0061 05B0 094D 3099 11D44 0062", "0061 3099 094D 11D44 05B0 0062"},
    {"0061 16B32 0315 0300 05AE 0062", "0061 05AE 16B32 0300 0315 0062"},
    {"0061 05AE 1D16D 302E 1D16D 0062", "0061 302E 1D16D 1D16D 05AE 0062"},
    {"0061 1D181 059A 0316 1DFA 0062", "0061 1DFA 1D181 0316 059A 0062"},
    {"0061 0315 0300 05AE 1D242 0062", "00E0 05AE 1D242 0315 0062"},
    {"0061 1E00A 0315 0300 05AE 0062", "0061 05AE 1E00A 0300 0315 0062"},
    {"0061 0315 0300 05AE 1E017 0062", "00E0 05AE 1E017 0315 0062"},
    {"0061 1E027 0315 0300 05AE 0062", "0061 05AE 1E027 0300 0315 0062"},
    {"0061 0315 0300 05AE 1E2EC 0062", "00E0 05AE 1E2EC 0315 0062"},
    {"0061 1E8D4 059A 0316 1DFA 0062", "0061 1DFA 1E8D4 0316 059A 0062"},
    {"09C7 0334 09BE", "09C7 0334 09BE"},
    {"0BC6 0334 0BBE", "0BC6 0334 0BBE"},
    {"0CC6 0334 0CD6", "0CC6 0334 0CD6"},
    {"0DD9 0334 0DDF", "0DD9 0334 0DDF"},
    {"0F5B 0334 0FB7", "0F5B 0334 0FB7"},
    {"0FAB 0334 0FB7", "0FAB 0334 0FB7"},
    {"1102 0334 116B", "1102 0334 116B"},
    {"1106 0334 1165", "1106 0334 1165"},
    {"1109 0334 1174", "1109 0334 1174"},
    {"110D 0334 116E", "110D 0334 116E"},
    {"1111 0334 1168", "1111 0334 1168"},
    {"1B0B 0334 1B35", "1B0B 0334 1B35"},
    {"1B3F 0334 1B35", "1B3F 0334 1B35"},
    {"AE14 0334 11B5", "AE14 0334 11B5"},
    {"B0EC 0334 11B5", "B0EC 0334 11B5"},
    {"B3C4 0334 11B5", "B3C4 0334 11B5"},
    {"B69C 0334 11B5", "B69C 0334 11B5"},
    {"B974 0334 11B5", "B974 0334 11B5"},
    {"BC4C 0334 11B5", "BC4C 0334 11B5"},
    {"BF24 0334 11B5", "BF24 0334 11B5"},
    {"C1FC 0334 11B5", "C1FC 0334 11B5"},
    {"C4D4 0334 11B5", "C4D4 0334 11B5"},
    {"C7AC 0334 11B5", "C7AC 0334 11B5"},
    {"CA84 0334 11B5", "CA84 0334 11B5"},
    {"CD5C 0334 11B5", "CD5C 0334 11B5"},
    {"D034 0334 11B5", "D034 0334 11B5"},
    {"D30C 0334 11B5", "D30C 0334 11B5"},
    {"D5E4 0334 11B5", "D5E4 0334 11B5"},
    {"11347 0334 1133E", "11347 0334 1133E"},
    {"115B9 0334 115AF", "115B9 0334 115AF"},
};

TEST(UnicodeNfc, MatchesTheConsortiumsNormalizationTest) {
    for (const Case& c : kCases) EXPECT_EQ(nfc(utf8_of(c.source)), utf8_of(c.nfc)) << c.source;
    // NFC is idempotent.
    for (const Case& c : kCases) EXPECT_EQ(nfc(utf8_of(c.nfc)), utf8_of(c.nfc)) << c.nfc;
}

TEST(UnicodeNfc, ComposesReordersAndLeavesTheRestAlone) {
    EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                       // e + U+0301 -> é
    EXPECT_EQ(nfc("Cafe\xCC\x81 ok"), "Caf\xC3\xA9 ok");
    EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> 각
    EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                    // Å (U+212B, a singleton) -> U+00C5
    EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");    // U+0958 is excluded from composition
    // a + U+0323 (class 220) + U+0302 (230) in either order -> U+1EAD.
    EXPECT_EQ(nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
    EXPECT_EQ(nfc("a\xCC\xA3\xCC\x82"), "\xE1\xBA\xAD");
    EXPECT_EQ(nfc("plain ASCII"), "plain ASCII");
    EXPECT_TRUE(nfc_trivially_unchanged("plain ASCII"));
    EXPECT_FALSE(nfc_trivially_unchanged("\xC3\xA9"));
    // Invalid UTF-8 is copied as is and composes with nothing.
    EXPECT_EQ(nfc("e\xFF\xCC\x81"), "e\xFF\xCC\x81");
    EXPECT_EQ(nfc("e\xCC\x81\xFF"), "\xC3\xA9\xFF");
    EXPECT_EQ(nfc(""), "");
}

// A tokenizer.json with an NFC normalizer (tests/data/hf_tokenizer/qwen3) tokenizes decomposed text
// as the precomposed form, as transformers does; the same vocabulary without it does not.
TEST(UnicodeNfc, TokenizerJsonNormalizerIsApplied) {
    const HfTokenizer hf = read_hf_tokenizer(test::source_dir() + "/tests/data/hf_tokenizer/qwen3");
    EXPECT_TRUE(hf.spec.nfc);
    auto tok = Tokenizer::from_vocab(Vocab::from_spec(hf.spec));
    const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";
    EXPECT_EQ(tok->encode(decomposed), tok->encode(composed));
    EXPECT_EQ(tok->decode(tok->encode(decomposed)), composed);
    // Special tokens are matched before the normalizer runs, on each side of them alike.
    EXPECT_EQ(tok->encode(decomposed + "<|im_end|>" + decomposed, {.parse_special = true}),
              tok->encode(composed + "<|im_end|>" + composed, {.parse_special = true}));
    VocabSpec without = hf.spec;
    without.nfc = false;
    auto raw = Tokenizer::from_vocab(Vocab::from_spec(without));
    EXPECT_NE(raw->encode(decomposed), raw->encode(composed));
    // Written back, the normalizer says NFC again.
    EXPECT_EQ(hf::normalizer_json(tok->vocab()), nlohmann::ordered_json::parse(R"({"type":"NFC"})"));
}

}  // namespace
}  // namespace pagoda::tokenizer
