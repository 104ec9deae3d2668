#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>
#include <iostream>

#include <random>

#include "core/error.h"
#include "grammar/matcher.h"

namespace pagoda::grammar {
namespace {

std::string error_of(std::string_view text) {
    try {
        parse_gbnf(text);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(GbnfParser, GoldenLowering) {
    EXPECT_EQ(parse_gbnf("root ::= \"ab\" | [x-z]")->to_gbnf(), "root ::= root-1 | [x-z]\nroot-1 ::= [a] [b]\n");
    EXPECT_EQ(parse_gbnf("root ::= [^\"\\\\]* # comment\n")->to_gbnf(),
              "root ::= root-1\nroot-1 ::= [^\\\"\\\\] root-1 | ()\n");
    EXPECT_EQ(parse_gbnf("root ::= d{2,3}\nd ::= [0-9]")->to_gbnf(),
              "root ::= d d root-2\nd ::= [0-9]\nroot-2 ::= d | ()\n");
    EXPECT_EQ(parse_gbnf("root ::= (a | \"b\")+ \n a ::= \"\\x41\\u00e9\" .")->to_gbnf(),
              "root ::= root-2 root-3\na ::= a-4 [^]\nroot-2 ::= a | [b]\nroot-3 ::= root-2 root-3 | ()\n"
              "a-4 ::= [A] [\\xE9]\n");
}

// A helper rule's usual name ("root-2") may be one the grammar defines itself: found by the gbnf
// fuzz target, whose to_gbnf() output then defined 'root-2' twice and did not parse.
TEST(GbnfParser, HelperNamesNeverTakeTheGrammarsOwn) {
    const std::string text = "root ::= ([a-c]{2,4} \" \") root-2\nroot-2 ::= \".\" | \"!#\"";
    auto g = parse_gbnf(text);
    const std::string printed = g->to_gbnf();
    EXPECT_EQ(printed,
              "root ::= root-2-1 root-2\nroot-2 ::= [.] | root-2-5\nroot-2-1 ::= [a-c] [a-c] root-4 [ ]\n"
              "root-3 ::= [a-c] | ()\nroot-4 ::= [a-c] root-3 | ()\nroot-2-5 ::= [!] [#]\n");
    auto again = parse_gbnf(printed);  // threw before: 'root-2' was defined twice
    for (const auto& [input, ok] : std::vector<std::pair<std::string, bool>>{
             {"ab .", true}, {"abca !#", true}, {"abcab .", false}, {"a .", false}}) {
        Matcher m1(g), m2(again);
        EXPECT_EQ(m1.accept(input) && m1.can_end(), ok) << input;
        EXPECT_EQ(m2.accept(input) && m2.can_end(), ok) << input;
    }
    // A helper's name is not a rule the grammar can refer to.
    EXPECT_NE(error_of("root ::= \"a\"* root-1").find("undefined rule 'root-1'"), std::string::npos);
}

TEST(GbnfParser, MultiLineRulesAndContinuation) {
    auto g = parse_gbnf("root ::= item\n  | item \",\" root\nitem ::=\n  \"x\"\n");
    Matcher m(g);
    EXPECT_TRUE(m.accept("x,x,x"));
    EXPECT_TRUE(m.can_end());
}

TEST(GbnfParser, ErrorsNameLineAndColumn) {
    EXPECT_EQ(error_of(""), "grammar: line 1, column 1: the grammar is empty (expected a rule such as: root ::= \"yes\")");
    EXPECT_EQ(error_of("root ::= \"abc"), "grammar: line 1, column 14: unterminated string literal");
    EXPECT_EQ(error_of("root ::= [a-"), "grammar: line 1, column 13: unterminated character class");
    EXPECT_EQ(error_of("root ::= (\"a\"\n"), "grammar: line 1, column 10: unclosed '('");
    EXPECT_EQ(error_of("root ::= \"a\")"), "grammar: line 1, column 13: unbalanced ')'");
    EXPECT_EQ(error_of("root ::= *"), "grammar: line 1, column 10: a repetition operator needs something before it");
    EXPECT_EQ(error_of("root ::= \"a\"**"), "grammar: line 1, column 14: two repetition operators in a row (use parentheses)");
    EXPECT_EQ(error_of("root ::= [z-a]"), "grammar: line 1, column 11: character range is reversed");
    EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar: line 1, column 12: unknown escape");
    EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "grammar: line 1, column 13: repetition has min > max");
    EXPECT_EQ(error_of("root ::= \"a\"{99999}"), "grammar: line 1, column 19: repetition count is above the limit of 10000");
    EXPECT_EQ(error_of("root ::= x\nroot ::= y"), "grammar: line 2, column 1: rule 'root' is defined twice");
    EXPECT_EQ(error_of("root : \"a\""), "grammar: line 1, column 6: expected '::=' after the rule name 'root'");
    EXPECT_EQ(error_of("rot ::= \"a\""), "grammar: there is no 'root' rule (the start symbol)");
    EXPECT_EQ(error_of("root ::= missing"), "grammar: rule 'root' refers to undefined rule 'missing'");
    EXPECT_EQ(error_of("root ::= \"\\xZZ\""), "grammar: line 1, column 13: expected a hexadecimal digit");
    EXPECT_EQ(error_of("root ::= \"\\uD800\""), "grammar: line 1, column 16: escape is not a Unicode scalar value");
    EXPECT_EQ(error_of(std::string("root ::= \"\xff\"")), "grammar: line 1, column 11: invalid UTF-8");
}

TEST(GbnfParser, RefusesLeftRecursion) {
    EXPECT_NE(error_of("root ::= root \"a\" | \"a\"").find("rule 'root' is left-recursive"), std::string::npos);
    EXPECT_NE(error_of("root ::= a\na ::= \"b\"? root").find("left-recursive"), std::string::npos);
    EXPECT_NE(error_of("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
    EXPECT_EQ(error_of("root ::= \"a\" root | \"a\""), "");  // right recursion is fine
}

TEST(GbnfParser, DeepNestingIsAnErrorNotACrash) {
    std::string deep = "root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')');
    EXPECT_NE(error_of(deep).find("nest too deeply"), std::string::npos);
}

// Random byte soup and mutations of a real grammar: always a clean result or a pagoda::Error.
TEST(GbnfParser, FuzzNeverCrashes) {
    const std::string base = "root ::= obj\nobj ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= [a-z]+ ws \":\" ws "
                             "[0-9]{1,3}\nws ::= [ \\t\\n]{0,4} # ws\n";
    const std::string alphabet = "()[]{}*+?|\"\\:=#^-.,0123456789ax \n";
    std::mt19937 rng(7);
    int parsed = 0, matched = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string text = base;
        const int edits = 1 + int(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const size_t at = rng() % (text.size() + 1);
            const int op = int(rng() % 3);
            if (op == 0 && at < text.size()) text.erase(at, 1);
            else if (op == 1) text.insert(text.begin() + std::ptrdiff_t(at), alphabet[rng() % alphabet.size()]);
            else if (at < text.size()) text[at] = char(rng() % 256);
        }
        try {
            auto g = parse_gbnf(text);
            ++parsed;
            Matcher m(g);
            matched += m.accept("{ab: 12, c:3}");
        } catch (const Error&) {
        }
    }
    // Some grammars survive one to four edits, and some of those still match the sample: a parser
    // that refused everything (or a matcher that accepted nothing) would pass the loop above.
    // Measured with seed 7: 246 of 3000 parse (8 %), 157 match; the stated floors: 5 % and 3 %.
    std::cout << "[ ACCEPTED ] " << parsed << " of 3000 grammars parse, " << matched << " match the sample\n";
    EXPECT_GE(parsed, 3000 * 5 / 100);
    EXPECT_GE(matched, 3000 * 3 / 100);
}

}  // namespace
}  // namespace pagoda::grammar
