// Hand-derived splits for each pre-tokenizer family (worked out from the regex semantics: leftmost
// alternative wins at each position, greedy repeats with backtracking, unmatched gaps kept as pieces).
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"

namespace pagoda::test {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& text) {
    tokenizer::PreTokenizer p(pre);
    Pieces out;
    for (auto piece : p.split(text)) out.emplace_back(piece);
    return out;
}

TEST(PreTokenizer, Gpt2ContractionsSpacesNumbersNewlines) {
    Pieces expected = {"I", "'ll", " go", " ", " now", "!!", " 12345", "\n", "\n", "x"};
    EXPECT_EQ(split("gpt-2", "I'll go  now!! 12345\n\nx"), expected);
    for (const char* alias : {"mpt", "olmo", "jais", "phi-2"}) EXPECT_EQ(split(alias, "I'll go  now!! 12345\n\nx"), expected);
    // Case-sensitive contractions: "'LL" is punctuation then letters.
    EXPECT_EQ(split("gpt-2", "I'LL"), (Pieces{"I", "'", "LL"}));
}

TEST(PreTokenizer, Llama3CaseInsensitiveContractionsAndDigitTriples) {
    Pieces expected = {"I", "'LL", " go", " ", " now", "!!", " ", "123", "45", "\n\n", "x"};
    for (const char* name : {"llama3", "llama-bpe", "dbrx", "smaug-bpe", "chatglm-bpe"})
        EXPECT_EQ(split(name, "I'LL go  now!! 12345\n\nx"), expected) << name;
    // Punctuation swallows the newlines after it.
    EXPECT_EQ(split("llama3", "x.\n\ny"), (Pieces{"x", ".\n\n", "y"}));
    // A non-letter, non-digit character may lead a word.
    EXPECT_EQ(split("llama3", "$abc"), (Pieces{"$abc"}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
    Pieces expected = {"I", "'LL", " go", " ", " now", "!!", " ", "1", "2", "3", "4", "5", "\n\n", "x"};
    for (const char* name : {"qwen2", "stablelm2"}) EXPECT_EQ(split(name, "I'LL go  now!! 12345\n\nx"), expected) << name;
}

TEST(PreTokenizer, DeepseekCoderSplitsCjkAndDigits) {
    EXPECT_EQ(split("deepseek-coder", "Hi \xE4\xB8\xAD\xE6\x96\x87, x=42\n"),
              (Pieces{"Hi", " ", "\xE4\xB8\xAD\xE6\x96\x87", ",", " x", "=", "4", "2", "\n"}));
}

TEST(PreTokenizer, DeepseekLlm) {
    EXPECT_EQ(split("deepseek-llm", "Hi \xE4\xB8\xAD\xE6\x96\x87, x=42  "),
              (Pieces{"Hi", " ", "\xE4\xB8\xAD\xE6\x96\x87", ",", " x", "=", "42", "  "}));
}

TEST(PreTokenizer, DeepseekV3) {
    // 中文かな
    std::string cjk = "\xE4\xB8\xAD\xE6\x96\x87\xE3\x81\x8B\xE3\x81\xAA";
    EXPECT_EQ(split("deepseek-v3", "x=12345 " + cjk + " (a)\n\n"),
              (Pieces{"x", "=", "123", "45", " ", cjk, " (", "a", ")\n\n"}));
}

TEST(PreTokenizer, FalconPunctuationRunsAndDigitTriples) {
    EXPECT_EQ(split("falcon", "a+b=c... 1234567 $x"),
              (Pieces{"a", "+", "b", "=", "c", "...", " ", "123", "456", "7", " ", "$", "x"}));
}

TEST(PreTokenizer, DefaultPunctuationThenDigits) {
    EXPECT_EQ(split("default", "a, b 12345"), (Pieces{"a", ",", " b", " ", "123", "45"}));
    EXPECT_EQ(split("", "a, b 12345"), (Pieces{"a", ",", " b", " ", "123", "45"}));
}

TEST(PreTokenizer, StarcoderFamilyIndividualDigits) {
    Pieces expected = {"x", " ", "4", "2", " y", "'s"};
    for (const char* name : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
        EXPECT_EQ(split(name, "x 42 y's"), expected) << name;
}

TEST(PreTokenizer, BloomFamilyStopsAtPunctuation) {
    // 你好。再见
    Pieces expected = {"Hello", ",", " world", "! (", "a", "|", "b", ")", " x", ".", "y",
                       " \xE4\xBD\xA0\xE5\xA5\xBD", "\xE3\x80\x82", "\xE5\x86\x8D\xE8\xA7\x81"};
    for (const char* name : {"bloom", "poro-chat", "gpt3-finnish"})
        EXPECT_EQ(split(name, "Hello, world! (a|b) x.y \xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE5\x86\x8D\xE8\xA7\x81"),
                  expected)
            << name;
    EXPECT_EQ(split("viking", "ab12 3"), (Pieces{"ab", "1", "2", " ", "3"}));
}

TEST(PreTokenizer, TekkenCaseAwareWords) {
    EXPECT_EQ(split("tekken", "HelloWorld ABCdef 42"), (Pieces{"Hello", "World", " ABCdef", " ", "4", "2"}));
    EXPECT_EQ(split("tekken", "x ABC"), (Pieces{"x", " ABC"}));
    EXPECT_EQ(split("tekken", "a!!/\n/b"), (Pieces{"a", "!!/\n/", "b"}));
    EXPECT_EQ(split("tekken", "a/b"), (Pieces{"a", "/b"}));
}

TEST(PreTokenizer, Gpt4oWordsKeepContractions) {
    EXPECT_EQ(split("gpt-4o", "HelloWorld's ABC 12345"), (Pieces{"Hello", "World's", " ABC", " ", "123", "45"}));
}

TEST(PreTokenizer, EveryKnownNameSplitsLosslessly) {
    std::string text = "Hello, World! It's 2024\t\n  caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 x\xFF\xFEy";
    for (const auto& name : tokenizer::known_pre_tokenizer_names()) {
        tokenizer::PreTokenizer p(name);
        std::string joined;
        for (auto piece : p.split(text)) {
            EXPECT_FALSE(piece.empty()) << name;
            joined += piece;
        }
        EXPECT_EQ(joined, text) << name;
    }
}

TEST(PreTokenizer, UnknownNameIsAnError) {
    EXPECT_THROW(tokenizer::PreTokenizer("no-such-pre"), Error);
    EXPECT_EQ(tokenizer::find_pre_tokenizer("no-such-pre"), nullptr);
}

TEST(PreTokenizer, LongWhitespaceRunDoesNotExhaustTheMatcher) {
    std::string text(1 << 20, ' ');
    text += "x";
    tokenizer::PreTokenizer p("llama3");
    auto pieces = p.split(text);
    ASSERT_EQ(pieces.size(), 2u);
    EXPECT_EQ(pieces[0].size(), (1u << 20) - 1);
    EXPECT_EQ(pieces[1], " x");
}

}  // namespace
}  // namespace pagoda::test
