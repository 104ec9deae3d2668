// gpt-oss's harmony splitter (chat/harmony.h): exact whole-output goldens (analysis to reasoning,
// final to content, calls re-written for the tool-call parser, malformed output degrading to
// content), streaming split at every byte boundary and random cuts equal to the whole, random
// inputs never crash and lose no body text; and the splitter feeding the harmony tool-call parser.
#include "chat/harmony.h"

#include <gtest/gtest.h>

#include <random>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

using namespace pagoda::chat;

namespace {

ReasoningParts stream(std::string_view text, const std::vector<size_t>& cuts) {
    ReasoningSplitter s(ReasoningFormat::harmony, false);
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

struct Golden {
    std::string text, reasoning, content;
};

const std::vector<Golden>& goldens() {
    static const std::vector<Golden> g = {
        // The usual answer: analysis, then final (<|return|> ends generation, so it is usually absent).
        {"<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
         "User greets. Reply.", "Hello!"},
        {"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>", "a", "b"},
        // No analysis; a final with a constraint in its header (structured output).
        {"<|channel|>final <|constrain|>json<|message|>{\"x\": 1}", "", "{\"x\": 1}"},
        // Cut inside the analysis (max_tokens): all reasoning so far.
        {"<|channel|>analysis<|message|>thinking about it", "thinking about it", ""},
        // A preamble on commentary is content; a tool call is re-written whole for the tool-call parser.
        {"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
         "<|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
         "Need weather.",
         "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
         "\"Paris\"}<|call|>"},
        {"<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.noop<|channel|>commentary "
         "json<|message|>{}",
         "", "Checking.<|start|>assistant to=functions.noop<|channel|>commentary json<|message|>{}"},
        // The recipient right after the role (the output starts with it).
        {" to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "",
         "<|start|> to=functions.f<|channel|>commentary json<|message|>{}<|call|>"},
        // Two analysis messages; a <|start|> without <|end|> before it is body text.
        {"<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>", "onetwo", ""},
        {"<|channel|>analysis<|message|>a<|start|>b<|message|>c<|end|><|start|>assistant<|channel|>final<|message|>d",
         "a<|start|>b<|message|>c", "d"},
        // Not harmony at all: content as written.
        {"Hello there <|channel|>final", "", "Hello there <|channel|>final"},
        {"", "", ""},
        {"<|chan", "", "<|chan"},
        // A header cut off by the end, or by a new message: its text is content.
        {"<|channel|>analysis", "", "<|channel|>analysis"},
        {"<|channel|>analysis<|start|>assistant<|channel|>final<|message|>ok", "", "<|channel|>analysisok"},
        // Text between messages is content as written; white space there is dropped.
        {"<|channel|>final<|message|>a<|end|> stray <|start|>assistant<|channel|>final<|message|>b", "", "a stray b"},
        {"<|channel|>final<|message|>a<|end|>\n\n<|start|>assistant<|channel|>final<|message|>b", "", "ab"},
        {"<|channel|>final<|message|>é 日本<|end|>", "", "é 日本"},
    };
    return g;
}

}  // namespace

TEST(Harmony, WholeOutputGoldens) {
    for (const auto& g : goldens()) {
        const ReasoningParts r = split_harmony(g.text);
        EXPECT_EQ(r.reasoning, g.reasoning) << g.text;
        EXPECT_EQ(r.content, g.content) << g.text;
    }
}

TEST(Harmony, HeaderLongerThanTheLimitIsContent) {
    const std::string header = "<|channel|>" + std::string(600, 'x');
    const std::string text = header + "<|message|>body<|end|><|start|>assistant<|channel|>final<|message|>ok";
    const ReasoningParts r = split_harmony(text);
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.content, header + "<|message|>body<|end|>ok");
    // ... and the same streamed (the decision is made on the first 512 bytes + <|message|> only).
    EXPECT_EQ(stream(text, {5, 300, 520, 523, 600}).content, r.content);
}

TEST(Harmony, EveryCutGivesTheWholeResult) {
    for (const auto& g : goldens()) {
        for (size_t cut = 0; cut <= g.text.size(); ++cut) {
            const ReasoningParts r = stream(g.text, {cut});
            ASSERT_EQ(r.reasoning, g.reasoning) << g.text << " cut at " << cut;
            ASSERT_EQ(r.content, g.content) << g.text << " cut at " << cut;
        }
        std::vector<size_t> bytes;
        for (size_t i = 1; i < g.text.size(); ++i) bytes.push_back(i);
        const ReasoningParts r = stream(g.text, bytes);
        EXPECT_EQ(r.reasoning, g.reasoning) << g.text << " byte by byte";
        EXPECT_EQ(r.content, g.content) << g.text << " byte by byte";
    }
}

TEST(Harmony, StreamsBodiesAsTheyArrive) {
    ReasoningSplitter s(ReasoningFormat::harmony, false);
    EXPECT_EQ(s.feed("<|channel|>analysis<|mess").reasoning, "");  // the header is not complete yet
    EXPECT_EQ(s.feed("age|>Let me").reasoning, "Let me");
    EXPECT_TRUE(s.in_reasoning());
    EXPECT_EQ(s.feed(" think<|e").reasoning, " think");  // "<|e" could be <|end|>: held
    const ReasoningParts p = s.feed("nd|><|start|>assistant<|channel|>final<|message|>Hi");
    EXPECT_EQ(p.reasoning, "");
    EXPECT_EQ(p.content, "Hi");
    EXPECT_FALSE(s.in_reasoning());
    EXPECT_EQ(s.finish().content, "");
}

TEST(Harmony, RandomInputsNeverCrashAndStreamLikeTheWhole) {
    const std::vector<std::string> atoms = {"<|start|>", "assistant", "<|channel|>", "analysis", "final", "commentary",
                                            " to=functions.f", "<|constrain|>json", "<|message|>", "<|end|>",
                                            "<|return|>", "<|call|>", "<|", "|>", " ", "\n", "x", "{\"a\": 1}", "é"};
    std::mt19937 rng(7);
    for (int trial = 0; trial < 3000; ++trial) {
        std::string text;
        const int n = int(rng() % 12);
        for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
        const ReasoningParts whole = split_harmony(text);
        std::vector<size_t> cuts;
        for (size_t i = 1; i < text.size(); ++i)
            if (rng() % 3 == 0) cuts.push_back(i);
        const ReasoningParts streamed = stream(text, cuts);
        ASSERT_EQ(streamed.reasoning, whole.reasoning) << text;
        ASSERT_EQ(streamed.content, whole.content) << text;
        // Nothing is invented: the output is never longer than the input plus the re-written calls.
        ASSERT_LE(whole.reasoning.size() + whole.content.size(),
                  text.size() * 2 + 32) << text;
    }
}

TEST(Harmony, TemplateDetectionAndFormatNames) {
    EXPECT_EQ(template_reasoning_format("{{ '<|start|>assistant<|channel|>final<|message|>' }}"), ReasoningFormat::harmony);
    EXPECT_EQ(template_reasoning_format("{{ '<think>' }}"), ReasoningFormat::deepseek);
    EXPECT_EQ(template_reasoning_format("{{ '<|im_start|>' }}"), ReasoningFormat::none);
    EXPECT_TRUE(template_thinks("<|channel|> <|message|>"));
    EXPECT_EQ(parse_reasoning_format("harmony"), ReasoningFormat::harmony);
}

TEST(Harmony, SplitterThenToolCallParserGivesCallsReasoningAndContent) {
    const std::string out =
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
    for (size_t cut = 0; cut <= out.size(); ++cut) {
        ReasoningSplitter s(ReasoningFormat::harmony, false);
        ToolCallParser calls(ToolCallFormat::harmony);
        ReasoningParts r;
        ParsedToolCalls parsed;
        auto take = [&](const ReasoningParts& p) {
            r.reasoning += p.reasoning;
            const ToolCallParts t = calls.feed(p.content);
            parsed.content += t.content;
            collect_tool_calls(parsed.calls, t.calls);
        };
        take(s.feed(std::string_view(out).substr(0, cut)));
        take(s.feed(std::string_view(out).substr(cut)));
        take(s.finish());
        const ToolCallParts t = calls.finish();
        parsed.content += t.content;
        collect_tool_calls(parsed.calls, t.calls);
        ASSERT_EQ(r.reasoning, "Need weather.") << cut;
        ASSERT_EQ(parsed.content, "") << cut;
        ASSERT_EQ(parsed.calls.size(), 1u) << cut;
        EXPECT_EQ(parsed.calls[0].name, "get_weather");
        EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris"})");
    }
}
