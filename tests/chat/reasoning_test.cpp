// The <think> splitter: whole-text results, streaming split at every byte boundary (and random
// cuts) equal to the whole, random inputs never crash and lose nothing outside the tags.
#include "chat/reasoning.h"

#include <gtest/gtest.h>
#include <random>

#include "core/error.h"

using namespace pagoda::chat;

namespace {

ReasoningParts stream(std::string_view text, const std::vector<size_t>& cuts, bool start_in) {
    ReasoningSplitter s(start_in);
    ReasoningParts all;
    size_t prev = 0;
    auto add = [&](const ReasoningParts& p) {
        all.reasoning += p.reasoning;
        all.content += p.content;
    };
    for (size_t c : cuts) {
        add(s.feed(text.substr(prev, c - prev)));
        prev = c;
    }
    add(s.feed(text.substr(prev)));
    add(s.finish());
    return all;
}

const char* kCases[] = {
    "<think>I should greet.</think>Hello!",
    "\n <think>\nstep 1\n</think>\n\nAnswer",
    "No thinking here <think>literal</think>",
    "<think>unfinished thought",
    "<thin",
    "</think>",
    "<think></think>",
    "<think>a</thin b</think>c</think>d",
    "",
    "   ",
    "<<think>x",
    "<think>é ü 日本</think>ñ",
};

}  // namespace

TEST(Reasoning, SplitsWholeText) {
    auto r = split_reasoning("<think>I should greet.</think>\n\nHello!");
    EXPECT_EQ(r.reasoning, "I should greet.");
    EXPECT_EQ(r.content, "Hello!");
    r = split_reasoning("Hello <think>no</think>");
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.content, "Hello <think>no</think>");
    r = split_reasoning("<think>cut by max_tokens");
    EXPECT_EQ(r.reasoning, "cut by max_tokens");
    EXPECT_EQ(r.content, "");
    r = split_reasoning("<thin");
    EXPECT_EQ(r.content, "<thin");
    r = split_reasoning("<think>a</think>b</think>c");
    EXPECT_EQ(r.reasoning, "a");
    EXPECT_EQ(r.content, "b</think>c");
}

TEST(Reasoning, StartsInsideWhenThePromptOpened) {
    auto r = split_reasoning("\nfirst I think\n</think>\n\nThe answer", true);
    EXPECT_EQ(r.reasoning, "\nfirst I think\n");
    EXPECT_EQ(r.content, "The answer");
    r = split_reasoning("never closed", true);
    EXPECT_EQ(r.reasoning, "never closed");
    EXPECT_EQ(r.content, "");
}

TEST(Reasoning, HoldsBackPartialTags) {
    ReasoningSplitter s;
    auto a = s.feed("<thi");
    EXPECT_EQ(a.content, "");
    EXPECT_EQ(a.reasoning, "");
    a = s.feed("nk>abc</th");
    EXPECT_EQ(a.reasoning, "abc");
    a = s.feed("ink>  ");
    EXPECT_EQ(a.reasoning, "");
    EXPECT_EQ(a.content, "");
    a = s.feed("x");
    EXPECT_EQ(a.content, "x");
}

TEST(Reasoning, EveryByteBoundaryEqualsTheWhole) {
    for (bool start_in : {false, true})
        for (const char* text : kCases) {
            const std::string t = text;
            const ReasoningParts whole = split_reasoning(t, start_in);
            for (size_t cut = 0; cut <= t.size(); ++cut) {
                const ReasoningParts got = stream(t, {cut}, start_in);
                EXPECT_EQ(got.reasoning, whole.reasoning) << t << " cut " << cut;
                EXPECT_EQ(got.content, whole.content) << t << " cut " << cut;
            }
            std::vector<size_t> every;
            for (size_t i = 1; i < t.size(); ++i) every.push_back(i);
            const ReasoningParts bytes = stream(t, every, start_in);
            EXPECT_EQ(bytes.reasoning, whole.reasoning) << t;
            EXPECT_EQ(bytes.content, whole.content) << t;
        }
}

TEST(Reasoning, RandomInputsAndCutsAgreeAndLoseNothing) {
    std::mt19937 rng(7);
    const std::vector<std::string> atoms = {"<think>", "</think>", "<", "</", "think", ">", " ", "\n", "a", "é", "<thi"};
    for (int iter = 0; iter < 2000; ++iter) {
        std::string t;
        const int n = int(rng() % 12);
        for (int i = 0; i < n; ++i) t += atoms[rng() % atoms.size()];
        const bool start_in = rng() % 2;
        const ReasoningParts whole = split_reasoning(t, start_in);
        std::vector<size_t> cuts;
        for (size_t i = 1; i < t.size(); ++i)
            if (rng() % 3 == 0) cuts.push_back(i);
        const ReasoningParts got = stream(t, cuts, start_in);
        ASSERT_EQ(got.reasoning, whole.reasoning) << t;
        ASSERT_EQ(got.content, whole.content) << t;
        // Nothing but the tags and the white space after </think> disappears.
        EXPECT_LE(whole.reasoning.size() + whole.content.size(), t.size());
        if (t.find("think>") == std::string::npos) EXPECT_EQ(whole.reasoning + whole.content, t) << t;
    }
}

TEST(Reasoning, FormatsAndTemplateDetection) {
    EXPECT_EQ(parse_reasoning_format("none"), ReasoningFormat::none);
    EXPECT_EQ(parse_reasoning_format("deepseek"), ReasoningFormat::deepseek);
    EXPECT_THROW(parse_reasoning_format("auto"), pagoda::Error);
    EXPECT_TRUE(template_thinks("{{ '<think>\\n' }}"));
    EXPECT_FALSE(template_thinks("{{ messages }}"));
    EXPECT_TRUE(prompt_opens_thinking("<|Assistant|><think>\n"));
    EXPECT_FALSE(prompt_opens_thinking("<think>x</think>"));
    EXPECT_FALSE(prompt_opens_thinking(""));
}
