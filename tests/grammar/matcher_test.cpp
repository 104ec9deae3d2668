#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/token_mask.h"
#include "tokenizer/utf8.h"

namespace pagoda::grammar {
namespace {

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}

bool is_prefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text);
}

TEST(Matcher, AcceptsAndRejects) {
    auto g = parse_gbnf(R"(
        root  ::= "{" ws pair ("," ws pair)* "}"
        pair  ::= key ws ":" ws value ws
        key   ::= "\"" [a-z]{1,4} "\""
        value ::= [0-9]+ | "true" | key
        ws    ::= [ ]?
    )");
    EXPECT_TRUE(matches(g, "{\"a\":1}"));
    EXPECT_TRUE(matches(g, "{ \"abcd\" : 12 , \"b\":true}"));
    EXPECT_TRUE(matches(g, "{\"a\":\"zz\"}"));
    EXPECT_FALSE(matches(g, "{\"abcde\":1}"));  // key too long
    EXPECT_FALSE(matches(g, "{\"a\":1"));        // a prefix only
    EXPECT_TRUE(is_prefix(g, "{\"a\":1"));
    EXPECT_FALSE(is_prefix(g, "{\"a\"  :"));     // two spaces
    EXPECT_FALSE(is_prefix(g, "{\"A\""));
    EXPECT_FALSE(matches(g, ""));
}

TEST(Matcher, RejectedBytesLeaveTheStateUnchanged) {
    Matcher m(parse_gbnf("root ::= \"ab\" \"c\"*"));
    EXPECT_TRUE(m.accept("a"));
    EXPECT_FALSE(m.accept("bx"));
    EXPECT_FALSE(m.can_end());
    EXPECT_TRUE(m.accept("b"));
    EXPECT_TRUE(m.can_end());
    EXPECT_TRUE(m.can_continue());
    EXPECT_TRUE(m.accept("ccc"));
}

TEST(Matcher, Utf8ByteByByte) {
    auto g = parse_gbnf("root ::= [é-ê] \"€\" [^a]");
    Matcher m(g);
    EXPECT_TRUE(m.accept("\xC3"));       // first byte of é
    EXPECT_FALSE(m.can_end());
    EXPECT_FALSE(m.accept("\xC3\xA8"));  // è is below the range... and a new lead byte is not a continuation
    EXPECT_TRUE(m.accept("\xA9"));       // é complete
    EXPECT_TRUE(m.accept("\xE2\x82"));   // two of the three bytes of €
    EXPECT_FALSE(m.accept("\xAD"));      // U+20AD, not €
    EXPECT_TRUE(m.accept("\xAC"));
    EXPECT_FALSE(m.accept("a"));
    EXPECT_FALSE(m.accept("\xC0\x80"));  // overlong NUL is not a character
    EXPECT_FALSE(m.accept("\xED\xA0\x80"));  // a surrogate is not a character
    EXPECT_TRUE(m.accept("\xF0\x9F\x98\x80"));  // 😀
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.can_continue());
    // A lead byte is refused at once when no character it could start is allowed.
    Matcher ascii(parse_gbnf("root ::= [a-z]"));
    EXPECT_FALSE(ascii.accept("\xC3"));
    EXPECT_FALSE(ascii.accept("\xE0"));  // could only start overlong forms of what the class holds
    EXPECT_FALSE(ascii.accept("\xF0"));
    Matcher any(parse_gbnf("root ::= [^a]"));
    EXPECT_FALSE(any.accept("\xED\xA0"));  // only surrogates can follow
    EXPECT_TRUE(any.accept("\xED\x9F"));
}

TEST(Matcher, AmbiguityIsBoundedAndDeduplicated) {
    Matcher m(parse_gbnf("root ::= [a]* [a]* [a]* \"b\""));
    EXPECT_TRUE(m.accept(std::string(500, 'a')));
    EXPECT_LE(m.state().ends.size(), 4u);
    EXPECT_TRUE(m.accept("b"));
    EXPECT_TRUE(m.can_end());
}

TEST(Matcher, NestingBeyondTheBoundIsRefusedNotACrash) {
    Matcher m(parse_gbnf("root ::= \"[\" root \"]\" | \"x\""));
    EXPECT_TRUE(m.accept(std::string(1000, '[')));
    EXPECT_FALSE(m.accept(std::string(100, '[')));  // deeper than kMaxStackDepth
}

// Every sentence of a finite grammar, by naive set expansion over the compiled form (independent of
// the matcher's stacks).
std::set<std::string> language(const Grammar& g, uint32_t rule, int depth = 0) {
    if (depth > 40) throw std::runtime_error("grammar is not finite");
    std::set<std::string> out;
    for (uint32_t alt : g.alternatives(rule)) {
        std::set<std::string> acc{""};
        for (uint32_t p = alt; g.element(p).kind != Element::Kind::end; ++p) {
            std::set<std::string> part;
            const Element& e = g.element(p);
            if (e.kind == Element::Kind::rule) {
                part = language(g, e.value, depth + 1);
            } else {
                const CharClass& c = g.char_class(e.value);
                for (const CharRange& r : c.ranges)
                    for (uint32_t cp = r.lo; cp <= r.hi; ++cp) {
                        std::string s;
                        tokenizer::utf8_append(s, char32_t(cp));
                        part.insert(s);
                    }
            }
            std::set<std::string> next;
            for (const auto& a : acc)
                for (const auto& b : part) next.insert(a + b);
            acc = std::move(next);
        }
        out.insert(acc.begin(), acc.end());
    }
    return out;
}

std::vector<std::string> synthetic_pieces() {
    return {"", "a", "b", "ab", "ba", "abc", "c", "0", "1", "2", "a0", "0a", "x", "xa", "ax", "\xC3", "\xA9", "\xC3\xA9",
            "a\xC3", "\xA9x", "\xE0", "\xF0", "\xE0\xA0", "aaaa", "b1x", "bb", "1b", "12", "", "cab", "é0", " ", "a b"};
}

TEST(TokenMask, MatchesBruteForceOverEveryTokenOfAFiniteGrammar) {
    auto g = parse_gbnf(R"(root ::= ("ab" | "a" [0-2] | "é"){1,3} ("x" | "c" "ab"?)?)");
    const std::set<std::string> sentences = language(*g, g->root());
    ASSERT_GT(sentences.size(), 50u);
    auto pieces = synthetic_pieces();
    const int32_t eos = int32_t(pieces.size());
    pieces.push_back("");  // the end token: no bytes
    auto trie = std::make_shared<TokenTrie>(pieces);
    TokenMasker masker(g, trie, {eos});
    std::mt19937 rng(3);
    for (int walk = 0; walk < 40; ++walk) {
        Matcher m(g);
        std::string prefix;
        for (int step = 0; step < 12; ++step) {
            const auto& bits = masker.allowed(m.state());
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < int32_t(pieces.size()); ++id) {
                bool expect = false;
                if (id == eos) expect = sentences.count(prefix) != 0;
                else if (!pieces[size_t(id)].empty())
                    for (const auto& s : sentences) expect = expect || s.rfind(prefix + pieces[size_t(id)], 0) == 0;
                const bool got = bits[size_t(id) >> 6] >> (id & 63) & 1;
                EXPECT_EQ(got, expect) << "prefix '" << prefix << "' token '" << pieces[size_t(id)] << "'";
                if (got) allowed.push_back(id);
            }
            if (allowed.empty()) break;
            const int32_t pick = allowed[rng() % allowed.size()];
            if (pick == eos) break;
            ASSERT_TRUE(m.accept(pieces[size_t(pick)]));
            prefix += pieces[size_t(pick)];
        }
    }
}

TEST(TokenMask, MatchesPerTokenAcceptOnARecursiveGrammar) {
    auto g = parse_gbnf(R"(
        root ::= "[" (v ("," v)*)? "]"
        v ::= root | [0-9] | "a" [b-c]* "x"
    )");
    auto pieces = synthetic_pieces();
    for (const char* p : {"[", "]", ",", "[]", "[1", "1]", "],[", "[[", "]]", "x]", ",a", "bx"}) pieces.push_back(p);
    auto trie = std::make_shared<TokenTrie>(pieces);
    TokenMasker masker(g, trie, {});
    std::mt19937 rng(5);
    for (int walk = 0; walk < 30; ++walk) {
        Matcher m(g);
        for (int step = 0; step < 30; ++step) {
            const auto& bits = masker.allowed(m.state());
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < int32_t(pieces.size()); ++id) {
                Matcher copy = m;
                const bool expect = !pieces[size_t(id)].empty() && copy.accept(pieces[size_t(id)]);
                EXPECT_EQ(bool(bits[size_t(id) >> 6] >> (id & 63) & 1), expect) << "token '" << pieces[size_t(id)] << "'";
                if (expect) allowed.push_back(id);
            }
            if (allowed.empty()) break;
            ASSERT_TRUE(m.accept(pieces[size_t(allowed[rng() % allowed.size()])]));
        }
    }
    EXPECT_GT(masker.cache_hits(), 0u);
}

// A state table too small for one walk falls back to stepping the matcher directly: same masks.
TEST(TokenMask, AFullStateTableGivesTheSameMasks) {
    auto g = parse_gbnf("root ::= [a-c0-2]{0,6} \"x\"");
    auto trie = std::make_shared<TokenTrie>(synthetic_pieces());
    TokenMasker roomy(g, trie, {}), tiny(g, trie, {}, 1, 2);
    Matcher m(g);
    for (const char* step : {"", "a", "b0", "12", "c"}) {
        ASSERT_TRUE(m.accept(step));
        EXPECT_EQ(roomy.allowed(m.state()), tiny.allowed(m.state())) << step;
    }
}

TEST(TokenMask, AnEndTokenThatSpellsTextIsOnlyAnEnd) {
    auto g = parse_gbnf("root ::= \"a\" \"b\"?");
    auto trie = std::make_shared<TokenTrie>(std::vector<std::string>{"a", "b", "ab"});
    TokenMasker masker(g, trie, {0});  // "a" doubles as a stop token
    Matcher m(g);
    EXPECT_EQ(masker.allowed(m.state())[0], 0b100u);  // only "ab": "a" would end before the grammar can
    ASSERT_TRUE(m.accept("a"));
    EXPECT_EQ(masker.allowed(m.state())[0], 0b011u);  // now it may end; "b" continues
}

TEST(TokenMask, ApplySetsMinusInfinityAndCountsWhatRemains) {
    auto g = parse_gbnf("root ::= \"ab\"");
    auto trie = std::make_shared<TokenTrie>(std::vector<std::string>{"a", "b", "ab", "", "x"});
    TokenMasker masker(g, trie, {3});
    std::vector<float> logits(7, 1.0f);  // the model's vocabulary may be larger than the tokenizer's
    Matcher m(g);
    EXPECT_EQ(masker.apply(m.state(), logits.data(), 7), 2);
    EXPECT_EQ(logits[0], 1.0f);
    EXPECT_EQ(logits[2], 1.0f);
    for (int i : {1, 3, 4, 5, 6}) EXPECT_TRUE(std::isinf(logits[size_t(i)]) && logits[size_t(i)] < 0) << i;
    ASSERT_TRUE(m.accept("ab"));
    std::vector<float> end(5, 0.0f);
    EXPECT_EQ(masker.apply(m.state(), end.data(), 5), 1);  // only the end token
    EXPECT_EQ(end[3], 0.0f);
}

TEST(Matcher, CompletionBytesIsTheShortestWayToEnd) {
    auto g = parse_gbnf("root ::= \"{\" item* \"}\" | \"é\" \"xyz\"\nitem ::= [a-z] \",\"");
    Matcher m(g);
    EXPECT_EQ(completion_bytes(*g, m.state()), 2u);  // "{}"
    ASSERT_TRUE(m.accept("{a"));
    EXPECT_EQ(completion_bytes(*g, m.state()), 2u);  // ",}"
    Matcher u(g);
    ASSERT_TRUE(u.accept("\xC3"));
    EXPECT_EQ(completion_bytes(*g, u.state()), 4u);  // one byte of é, then "xyz"
    ASSERT_TRUE(u.accept("\xA9xyz"));
    EXPECT_EQ(completion_bytes(*g, u.state()), 0u);
    EXPECT_EQ(completion_bytes(*parse_gbnf("root ::= \"a\" root"), Matcher(parse_gbnf("root ::= \"a\" root")).state()),
              Grammar::kNever);
}

// With a budget, every allowed token leaves a completion that fits: walking with the tightest
// budget that still fits always ends in a sentence, exactly at the budget.
TEST(TokenMask, ABudgetKeepsTheOutputCompletable) {
    auto g = parse_gbnf(R"(root ::= "[" (v ("," v)*)? "]"
        v ::= root | [0-9]+ | "a" [b-c]* "x")");
    auto pieces = synthetic_pieces();
    const int32_t eos = int32_t(pieces.size());
    pieces.push_back("");
    for (const char* p : {"[", "]", ",", "[[", "[1", "],[", "[[[[", "x]", ",a", "bx"}) pieces.push_back(p);
    auto trie = std::make_shared<TokenTrie>(pieces);
    TokenMasker masker(g, trie, {eos});
    std::mt19937 rng(11);
    for (int walk = 0; walk < 200; ++walk) {
        const int64_t budget = 2 + int64_t(rng() % 12);
        Matcher m(g);
        bool ended = false;
        for (int64_t used = 0; used < budget && !ended; ++used) {
            const auto& bits = masker.allowed(m.state(), budget - used);
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < int32_t(pieces.size()); ++id)
                if (bits[size_t(id) >> 6] >> (id & 63) & 1) allowed.push_back(id);
            ASSERT_FALSE(allowed.empty());
            const int32_t pick = allowed[rng() % allowed.size()];
            if (pick == eos) ended = true;
            else ASSERT_TRUE(m.accept(pieces[size_t(pick)]));
            EXPECT_LE(completion_bytes(*g, m.state()), uint32_t(budget - used - 1));
        }
        EXPECT_TRUE(m.can_end()) << "budget " << budget;
    }
}

}  // namespace
}  // namespace pagoda::grammar
