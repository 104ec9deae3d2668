// The reasoning prefix (grammar/reasoning_prefix.h): an optional block of free text in the model's
// tags before the answer grammar, closed by the first closing tag; the answer grammar unchanged after it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/reasoning_prefix.h"

namespace pagoda::grammar {
namespace {

// Whole-sentence acceptance: every byte taken and the grammar can end there.
bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}

bool takes(const std::shared_ptr<const Grammar>& g, std::string_view text) {
    Matcher m(g);
    return m.accept(text);
}

TEST(ReasoningPrefix, OptionalBlockThenTheAnswer) {
    const auto answer = json_object_grammar();
    const auto g = with_reasoning_prefix(*answer, {}, false);
    EXPECT_TRUE(accepts(g, "{}"));
    EXPECT_TRUE(accepts(g, R"(<think>I think {"a": 1} fits</think>{"a":1})"));
    EXPECT_TRUE(accepts(g, "<think></think>\n\n{}"));
    // Partial closing tags, '<' runs and non-ASCII text are reasoning like any other text.
    EXPECT_TRUE(accepts(g, "<think>a<b </th <</think </thinkx <<</ \xC3\xA9\xE2\x9C\x93</think>{}"));
    // The first closing tag ends the block: what follows is the answer, held to the grammar.
    EXPECT_FALSE(takes(g, "<think>a</think>b</think>{}"));
    EXPECT_FALSE(takes(g, "<think>a</think>not json"));
    EXPECT_FALSE(accepts(g, "<think>never closed {}"));
    EXPECT_FALSE(takes(g, "x<think>"));  // the block comes first or not at all
    EXPECT_FALSE(accepts(g, "<think>a</think>"));  // the answer is not optional
}

TEST(ReasoningPrefix, PromptThatOpenedTheBlock) {
    const auto answer = json_object_grammar();
    const auto g = with_reasoning_prefix(*answer, {}, true);
    EXPECT_TRUE(accepts(g, "thinking <think> about it</think> {}"));
    EXPECT_TRUE(accepts(g, "</think>{}"));
    EXPECT_FALSE(accepts(g, "{}"));  // still inside the block: it must close
    EXPECT_TRUE(takes(g, "{}"));
}

TEST(ReasoningPrefix, OtherTagsAndRuleNamesThatCollide) {
    // An answer grammar whose own rule names look like the prefix's.
    const auto answer = parse_gbnf(R"(root ::= think-root "!"
think-root ::= "a" | "b"
think-body-0 ::= "x")");
    const auto g = with_reasoning_prefix(*answer, {"<|channel|>analysis<|message|>", "<|end|><|start|>assistant"}, false);
    EXPECT_TRUE(accepts(g, "a!"));
    EXPECT_TRUE(accepts(g, "<|channel|>analysis<|message|>Let me see. <|end|> <|end|><|start|>user<|end|><|start|>assistantb!"));
    EXPECT_FALSE(takes(g, "<|channel|>analysis<|message|>x<|end|><|start|>assistantx"));
    EXPECT_THROW(with_reasoning_prefix(*answer, {"", "</think>"}, false), Error);
    EXPECT_THROW(with_reasoning_prefix(*answer, {"<t>", "</\xC3\xA9>"}, false), Error);
}

TEST(ReasoningPrefix, SpecOfKeepsTheLanguage) {
    const auto answer = compile_json_schema(nlohmann::json::parse(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})"));
    const auto copy = Grammar::compile(spec_of(*answer, "x-"));
    for (const char* text : {R"({"n":12})", R"({"n":-3,"q":true})", R"({"m":1})", "{}", R"({"n":1.5})"})
        EXPECT_EQ(accepts(answer, text), accepts(copy, text)) << text;
    EXPECT_TRUE(accepts(copy, R"({"n":12})"));
}

}  // namespace
}  // namespace pagoda::grammar
