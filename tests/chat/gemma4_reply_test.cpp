// Gemma 4's replies: the thinking channel (<|channel>thought\n…<channel|>) split off as reasoning,
// and its tool calls (<|tool_call>call:NAME{…}<tool_call|>, arguments in the template's own notation)
// as calls with JSON arguments. Exact goldens for whole replies, the argument notation's conversions
// one by one, every byte boundary of a streamed reply equal to the whole, malformed markup kept as
// content, random inputs that never crash, and both formats detected from Gemma 4's chat template.
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <sstream>

#include "chat/reasoning.h"
#include "chat/tool_call_gemma4.h"
#include "chat/tool_calls.h"
#include "fixtures.h"
#include "tool_call_stream.h"

namespace pagoda::chat {
namespace {

const std::string Q = "<|\"|>";  // Gemma 4's string quote

std::string convert(std::string_view args) {
    Gemma4ArgsReader r;
    std::string out;
    const size_t n = r.read(args, true, out);
    EXPECT_EQ(n, args.size()) << args;
    EXPECT_EQ(r.status(), Gemma4ArgsReader::Status::complete) << args;
    return out;
}

TEST(Gemma4Args, TheTemplatesNotationBecomesJson) {
    EXPECT_EQ(convert("{}"), "{}");
    EXPECT_EQ(convert("{location:" + Q + "Tokyo" + Q + ",unit:" + Q + "celsius" + Q + "}"),
              R"({"location":"Tokyo","unit":"celsius"})");
    EXPECT_EQ(convert("{n:42,x:-1.5e3,ok:true,no:false,nothing:null}"), R"({"n":42,"x":-1.5e3,"ok":true,"no":false,"nothing":null})");
    EXPECT_EQ(convert("{outer:{inner:" + Q + "v" + Q + ",list:[1," + Q + "a" + Q + ",[true],{k:null}]},empty:[]}"),
              R"({"outer":{"inner":"v","list":[1,"a",[true],{"k":null}]},"empty":[]})");
    // Strings keep every character, escaped for JSON; quoted keys (format_argument's escape_keys).
    EXPECT_EQ(convert("{" + Q + "my key" + Q + ":" + Q + "say \"hi\"\n\tC:\\dir {a:1}," + Q + "}"),
              R"({"my key":"say \"hi\"\n\tC:\\dir {a:1},"})");
    // A bare value that is no JSON literal or number is a string; white space and a trailing comma are tolerated.
    EXPECT_EQ(convert("{ a : hello world , b:01, c:[1, 2,], }"), R"({"a":"hello world","b":"01","c":[1,2]})");
    // JSON itself, as a grammar-forced call writes it.
    EXPECT_EQ(convert(R"({"city": "Pa\"ris", "days": [1, 2.5], "o": {"k": "\u00e9"}})"),
              R"({"city":"Pa\"ris","days":[1,2.5],"o":{"k":"\u00e9"}})");
}

TEST(Gemma4Args, SyntaxErrorsStopBeforeTheOffendingByte) {
    for (const auto& [text, json, consumed] : std::vector<std::tuple<std::string, std::string, size_t>>{
             {"x", "", 0},                                    // not an object
             {"{a:" + Q + "x" + Q + " y}", R"({"a":"x")", 15},  // junk after a value
             {"{:1}", "{", 1},                                // no key
             {"{a:}", R"({"a":)", 3},                         // no value
             {"{a:1]", R"({"a":1)", 4},                       // the wrong bracket
         }) {
        Gemma4ArgsReader r;
        std::string out;
        EXPECT_EQ(r.read(text, true, out), consumed) << text;
        EXPECT_EQ(r.status(), Gemma4ArgsReader::Status::stopped) << text;
        EXPECT_EQ(out, json) << text;
    }
    // Nesting deeper than the bound stops too (bounded work, no recursion).
    Gemma4ArgsReader deep;
    std::string out;
    deep.read("{a:" + std::string(300, '['), true, out);
    EXPECT_EQ(deep.status(), Gemma4ArgsReader::Status::stopped);
}

ParsedToolCalls stream(std::string_view text, const std::vector<size_t>& cuts) {
    ToolCallParser p(ToolCallFormat::gemma4);
    return stream_tool_calls(p, text, cuts);
}

struct Reply {
    std::string text;
    std::string content;
    std::vector<ToolCall> calls;
};

const std::vector<Reply>& replies() {
    static const std::vector<Reply> r = {
        {"<|tool_call>call:get_weather{location:" + Q + "Tokyo" + Q + ",days:3}<tool_call|>",
         "",
         {{"get_weather", R"({"location":"Tokyo","days":3})"}}},
        // Text before, two calls back to back, text after.
        {"Checking both.\n<|tool_call>call:get_weather{location:" + Q + "Paris" + Q + "}<tool_call|><|tool_call>call:noop{}"
         "<tool_call|>\nDone.",
         "Checking both.Done.",
         {{"get_weather", R"({"location":"Paris"})"}, {"noop", "{}"}}},
        // Cut off inside a string (max_tokens): the call keeps what it got.
        {"<|tool_call>call:write{path:" + Q + "a.txt" + Q + ",text:" + Q + "line one\nline", "",
         {{"write", R"({"path":"a.txt","text":"line one\nline)"}}},
        // Not calls: no call: prefix, a name with a space, no brace; kept as content byte for byte.
        {"<|tool_call>get_weather{}<tool_call|>", "<|tool_call>get_weather{}<tool_call|>", {}},
        {"a <|tool_call>call:bad name{}", "a <|tool_call>call:bad name{}", {}},
        {"<|tool_call>call:f", "<|tool_call>call:f", {}},
        // A syntax error ends the call; the rest up to the close marker is content.
        {"<|tool_call>call:f{a:" + Q + "x" + Q + " y}<tool_call|>tail", "y}<tool_call|>tail", {{"f", R"({"a":"x")"}}},
        // Plain text and look-alikes.
        {"a < b {c:1} <|tool", "a < b {c:1} <|tool", {}},
        {"", "", {}},
    };
    return r;
}

TEST(Gemma4ToolCalls, WholeRepliesGiveExactCalls) {
    for (const Reply& r : replies()) {
        const ParsedToolCalls got = parse_tool_calls(r.text, ToolCallFormat::gemma4);
        EXPECT_EQ(got.content, r.content) << r.text;
        ASSERT_EQ(got.calls.size(), r.calls.size()) << r.text;
        for (size_t i = 0; i < r.calls.size(); ++i) {
            EXPECT_EQ(got.calls[i].name, r.calls[i].name) << r.text;
            EXPECT_EQ(got.calls[i].arguments, r.calls[i].arguments) << r.text;
        }
    }
}

TEST(Gemma4ToolCalls, EveryByteBoundaryEqualsTheWhole) {
    for (const Reply& r : replies()) {
        const ParsedToolCalls whole = parse_tool_calls(r.text, ToolCallFormat::gemma4);
        for (size_t cut = 0; cut <= r.text.size(); ++cut) expect_same_calls(stream(r.text, {cut}), whole, r.text);
        std::vector<size_t> every;
        for (size_t i = 1; i < r.text.size(); ++i) every.push_back(i);
        expect_same_calls(stream(r.text, every), whole, r.text + " (byte by byte)");
    }
}

TEST(Gemma4ToolCalls, ArgumentsStreamBeforeTheCallCloses) {
    ToolCallParser p(ToolCallFormat::gemma4);
    ToolCallParts a = p.feed("<|tool_call>call:write{text:" + Q + "long te");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "write");
    EXPECT_EQ(a.calls[0].arguments, R"({"text":"long te)");
    ToolCallParts b = p.feed("xt" + Q + "}<tool_call|>");
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(b.calls[0].arguments, R"(xt"})");
    EXPECT_EQ(b.content, "");
}

TEST(Gemma4ToolCalls, RandomInputsNeverCrashAndStreamingAgrees) {
    std::mt19937 rng(17);
    const std::vector<std::string> atoms = {"<|tool_call>", "<tool_call|>", "call:", "f", "{", "}", "[", "]", ":", ",",
                                            Q, "<|\"", "\"", "\\", "a", "1", "true", " ", "\n", "<", "|", std::string(300, 'x')};
    for (int iter = 0; iter < 6000; ++iter) {
        std::string t;
        const int n = int(rng() % 14);
        for (int i = 0; i < n; ++i) t += atoms[rng() % atoms.size()];
        if (rng() % 10 == 0) t += "<|tool_call>call:f{a:" + std::string(300, '[');
        const ParsedToolCalls whole = parse_tool_calls(t, ToolCallFormat::gemma4);
        std::vector<size_t> cuts;
        for (size_t i = 1; i < t.size(); ++i)
            if (rng() % 4 == 0) cuts.push_back(i);
        expect_same_calls(stream(t, cuts), whole, t);
        for (const auto& call : whole.calls) EXPECT_FALSE(call.name.empty());
    }
}

// --- the thinking channel --------------------------------------------------------------------------

TEST(Gemma4Reasoning, TheThoughtChannelIsReasoning) {
    auto split = [](std::string_view text) {
        ReasoningSplitter s(ReasoningFormat::gemma4, false);
        return split_whole(s, text);
    };
    ReasoningParts p = split("<|channel>thought\nThe user wants 2+2.<channel|>The answer is 4.");
    EXPECT_EQ(p.reasoning, "The user wants 2+2.");
    EXPECT_EQ(p.content, "The answer is 4.");
    p = split("\n<|channel>thought\n<channel|>\n\nHi.");  // an empty thought, white space around it
    EXPECT_EQ(p.reasoning, "");
    EXPECT_EQ(p.content, "Hi.");
    p = split("<|channel>other name<channel|>x");  // another label is kept as reasoning
    EXPECT_EQ(p.reasoning, "other name");
    EXPECT_EQ(p.content, "x");
    p = split("<|channel>thought\nstill thinking");  // cut off inside the channel
    EXPECT_EQ(p.reasoning, "still thinking");
    EXPECT_EQ(p.content, "");
    p = split("No thinking. <|channel>later<channel|>");  // only at the start
    EXPECT_EQ(p.reasoning, "");
    EXPECT_EQ(p.content, "No thinking. <|channel>later<channel|>");
    p = split("<think>not Gemma's</think>ok");
    EXPECT_EQ(p.content, "<think>not Gemma's</think>ok");
    // Then a tool call: the content part is what the tool-call parser reads.
    p = split("<|channel>thought\nNeed the weather.<channel|><|tool_call>call:noop{}<tool_call|>");
    EXPECT_EQ(p.reasoning, "Need the weather.");
    EXPECT_EQ(p.content, "<|tool_call>call:noop{}<tool_call|>");
}

TEST(Gemma4Reasoning, EveryByteBoundaryEqualsTheWhole) {
    for (const std::string text : {"<|channel>thought\nA <channel plan|>.<channel|>  Answer <|channel>x",
                                   "<|channel>thoughts\n<channel|>", "<|channel>thought", "<|chan", " thought\n"}) {
        ReasoningSplitter w(ReasoningFormat::gemma4, false);
        const ReasoningParts whole = split_whole(w, text);
        for (size_t step = 1; step <= 3; ++step) {
            ReasoningSplitter s(ReasoningFormat::gemma4, false);
            ReasoningParts got;
            for (size_t i = 0; i < text.size(); i += step) {
                const ReasoningParts part = s.feed(text.substr(i, step));
                got.reasoning += part.reasoning;
                got.content += part.content;
            }
            const ReasoningParts rest = s.finish();
            EXPECT_EQ(got.reasoning + rest.reasoning, whole.reasoning) << text << " step " << step;
            EXPECT_EQ(got.content + rest.content, whole.content) << text << " step " << step;
        }
    }
}

TEST(Gemma4Formats, DetectedFromGemma4sChatTemplate) {
    std::ifstream in(test::source_dir() + "/tests/data/chat_templates/gemma4.jinja");
    ASSERT_TRUE(in) << "tests/data/chat_templates/gemma4.jinja is missing";
    std::stringstream source;
    source << in.rdbuf();
    EXPECT_EQ(detect_tool_call_format(source.str()), ToolCallFormat::gemma4);
    EXPECT_EQ(template_reasoning_format(source.str()), ReasoningFormat::gemma4);
    EXPECT_EQ(parse_reasoning_format("gemma4"), ReasoningFormat::gemma4);
    EXPECT_STREQ(tool_call_format_name(ToolCallFormat::gemma4), "gemma4");
}

}  // namespace
}  // namespace pagoda::chat
