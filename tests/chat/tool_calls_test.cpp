// Tool-call parsing for the JSON formats (hermes, mistral, llama3_json): whole outputs, streaming
// split at every byte boundary equal to the whole, look-alikes that stay content, template
// detection, and random inputs over every format that never crash and agree between streaming and
// whole. The tagged formats (Qwen3-Coder, DeepSeek V3, harmony) are in tool_call_formats_test.cpp.
#include "chat/tool_calls.h"

#include <gtest/gtest.h>
#include <random>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "tool_call_stream.h"

using namespace pagoda::chat;

namespace {

ParsedToolCalls stream(std::string_view text, const std::vector<size_t>& cuts, ToolCallFormat format) {
    ToolCallParser p(format);
    return stream_tool_calls(p, text, cuts);
}

// The output is exactly one call and no content.
void expect_only_call(const ParsedToolCalls& r, const std::string& name, const std::string& arguments) {
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, name);
    EXPECT_EQ(r.calls[0].arguments, arguments);
}

struct Case {
    ToolCallFormat format;
    std::string text;
};

const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        {ToolCallFormat::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
        {ToolCallFormat::hermes,
         "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
         "\"arguments\": {\"x\": \"</tool_call>\"}}\n</tool_call>"},
        {ToolCallFormat::hermes, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": [1, 2]}}"},
        {ToolCallFormat::hermes, "text <tool_call>not json</tool_call> more"},
        {ToolCallFormat::hermes, "a <tool_ca b"},
        {ToolCallFormat::hermes, "<tool_call>"},
        {ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"q\": \"[x]\"}}, {\"name\": \"g\", \"arguments\": {}}]"},
        {ToolCallFormat::mistral, "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]"},
        {ToolCallFormat::mistral, "Sure [TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}] done"},
        {ToolCallFormat::mistral, "[1, 2] is a list"},
        {ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": \"f\""},
        {ToolCallFormat::llama3_json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
        {ToolCallFormat::llama3_json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"n\": 2}}"},
        {ToolCallFormat::llama3_json, "  {\"answer\": 42}"},
        {ToolCallFormat::llama3_json, "The answer is {\"name\": \"f\", \"parameters\": {}}"},
        {ToolCallFormat::llama3_json, "{\"name\": \"f\", \"parameters\": {\"s\": \"}\\\"{\"}}"},
        {ToolCallFormat::llama3_json, "<|python_tag|>brave_search.call(query=\"x\")"},
    };
    return c;
}

}  // namespace

TEST(ToolCalls, Hermes) {
    expect_only_call(parse_tool_calls(cases()[0].text, ToolCallFormat::hermes), "get_weather", R"({"city":"Paris"})");
    auto r = parse_tool_calls(cases()[1].text, ToolCallFormat::hermes);
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 2u) << "the second call's JSON holds the close tag inside a string";
    EXPECT_EQ(r.calls[1].arguments, R"({"x":"</tool_call>"})");
    r = parse_tool_calls(cases()[2].text, ToolCallFormat::hermes);
    ASSERT_EQ(r.calls.size(), 1u) << "an unclosed call whose JSON is whole is still a call";
    EXPECT_EQ(r.calls[0].arguments, R"({"k":[1,2]})");
    r = parse_tool_calls(cases()[3].text, ToolCallFormat::hermes);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, cases()[3].text);
    EXPECT_EQ(parse_tool_calls(cases()[4].text, ToolCallFormat::hermes).content, cases()[4].text);
    EXPECT_EQ(parse_tool_calls("<tool_call>", ToolCallFormat::hermes).content, "<tool_call>");
}

TEST(ToolCalls, HermesArgumentsAsStringAndParameters) {
    auto r = parse_tool_calls(R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)", ToolCallFormat::hermes);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"a": 1})");
    r = parse_tool_calls(R"(<tool_call>{"name": "f", "parameters": {"b": true}}</tool_call>)", ToolCallFormat::hermes);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"b":true})");
    r = parse_tool_calls(R"(<tool_call>{"name": "f"}</tool_call>)", ToolCallFormat::hermes);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{}");
    for (const char* bad : {R"(<tool_call>{"name": 3}</tool_call>)", R"(<tool_call>{"name": "f", "arguments": 3}</tool_call>)",
                            R"(<tool_call>[{"name": "f"}]</tool_call>)", R"(<tool_call>{"name": ""}</tool_call>)"}) {
        r = parse_tool_calls(bad, ToolCallFormat::hermes);
        EXPECT_TRUE(r.calls.empty()) << bad;
        EXPECT_EQ(r.content, bad);
    }
}

TEST(ToolCalls, Mistral) {
    auto r = parse_tool_calls(cases()[6].text, ToolCallFormat::mistral);
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "f");
    EXPECT_EQ(r.calls[0].arguments, R"({"q":"[x]"})");
    EXPECT_EQ(r.calls[1].name, "g");
    r = parse_tool_calls(cases()[7].text, ToolCallFormat::mistral);
    ASSERT_EQ(r.calls.size(), 1u) << "the marker is a control token decoding may drop";
    r = parse_tool_calls(cases()[8].text, ToolCallFormat::mistral);
    EXPECT_EQ(r.content, "Suredone");
    ASSERT_EQ(r.calls.size(), 1u);
    r = parse_tool_calls(cases()[9].text, ToolCallFormat::mistral);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, cases()[9].text);
    r = parse_tool_calls(cases()[10].text, ToolCallFormat::mistral);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, cases()[10].text);
}

TEST(ToolCalls, Llama3Json) {
    expect_only_call(parse_tool_calls(cases()[11].text, ToolCallFormat::llama3_json), "get_weather", R"({"city":"Oslo"})");
    auto r = parse_tool_calls(cases()[12].text, ToolCallFormat::llama3_json);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[1].arguments, R"({"n":2})");
    for (size_t i : {13, 14, 16}) {
        r = parse_tool_calls(cases()[i].text, ToolCallFormat::llama3_json);
        EXPECT_TRUE(r.calls.empty()) << cases()[i].text;
        EXPECT_EQ(r.content, cases()[i].text);
    }
    r = parse_tool_calls(cases()[15].text, ToolCallFormat::llama3_json);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"s":"}\"{"})");
}

TEST(ToolCalls, PlainContentIsUntouched) {
    for (auto f : {ToolCallFormat::hermes, ToolCallFormat::mistral, ToolCallFormat::llama3_json,
                   ToolCallFormat::qwen3_coder, ToolCallFormat::deepseek_v3, ToolCallFormat::harmony,
                   ToolCallFormat::minimax_m2})
        for (const char* text : {"", "  hello  ", "\n", "a < b [c] {d"}) {
            EXPECT_EQ(parse_tool_calls(text, f).content, text) << tool_call_format_name(f);
            EXPECT_TRUE(parse_tool_calls(text, f).calls.empty());
        }
}

TEST(ToolCalls, EveryByteBoundaryEqualsTheWhole) {
    for (const auto& c : cases()) {
        const ParsedToolCalls whole = parse_tool_calls(c.text, c.format);
        for (size_t cut = 0; cut <= c.text.size(); ++cut) expect_same_calls(stream(c.text, {cut}, c.format), whole, c.text);
        std::vector<size_t> every;
        for (size_t i = 1; i < c.text.size(); ++i) every.push_back(i);
        expect_same_calls(stream(c.text, every, c.format), whole, c.text + " (byte by byte)");
    }
}

TEST(ToolCalls, RandomInputsNeverCrashAndStreamingAgrees) {
    std::mt19937 rng(11);
    const std::vector<std::string> atoms = {"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>",
                                            "<function=f>", "<parameter=a>", "</parameter>", "</function>",
                                            "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>f\n",
                                            "```json\n", "<｜tool▁call▁end｜>", "<|start|>assistant", "<|channel|>",
                                            "commentary to=functions.f ", "<|message|>", "<|call|>", "final",
                                            std::string(300, 'n'), "```json",
                                            "{\"name\": \"f\", \"arguments\": {}}", "{", "}", "[", "]", "\"",
                                            "\\", ";", " ", "\n", "x", "<tool", "{\"name\": \"g\", \"parameters\": {\"a\": [",
                                            "<minimax:tool_call>", "</minimax:tool_call>", "<invoke name=\"f\">",
                                            "<parameter name=\"a\">", "</invoke>", "<invoke name="};
    const ToolCallFormat formats[] = {ToolCallFormat::hermes,      ToolCallFormat::mistral,     ToolCallFormat::llama3_json,
                                      ToolCallFormat::qwen3_coder, ToolCallFormat::deepseek_v3, ToolCallFormat::harmony,
                                      ToolCallFormat::minimax_m2};
    for (int iter = 0; iter < 6000; ++iter) {
        std::string t;
        const int n = int(rng() % 10);
        for (int i = 0; i < n; ++i) t += atoms[rng() % atoms.size()];
        if (rng() % 10 == 0) t += std::string(300, '[');  // deep nesting: refused, not recursed into
        const ToolCallFormat f = formats[rng() % std::size(formats)];
        const ParsedToolCalls whole = parse_tool_calls(t, f);
        std::vector<size_t> cuts;
        for (size_t i = 1; i < t.size(); ++i)
            if (rng() % 4 == 0) cuts.push_back(i);
        expect_same_calls(stream(t, cuts, f), whole, t);
        EXPECT_LE(whole.content.size(), t.size());
        for (const auto& call : whole.calls) EXPECT_FALSE(call.name.empty());
    }
}

TEST(ToolCallFormat, DetectedFromTheTemplates) {
    auto src = [](const char* name) { return ChatTemplate::builtin(name).source(); };
    EXPECT_EQ(detect_tool_call_format(src("qwen2.5")), ToolCallFormat::hermes);
    EXPECT_EQ(detect_tool_call_format(src("qwen3")), ToolCallFormat::hermes);
    EXPECT_EQ(detect_tool_call_format(src("chatml")), ToolCallFormat::hermes);
    EXPECT_EQ(detect_tool_call_format(src("llama3.1")), ToolCallFormat::llama3_json);
    EXPECT_EQ(detect_tool_call_format(src("mistral-v3")), ToolCallFormat::mistral);
    EXPECT_EQ(detect_tool_call_format(src("llama2")), std::nullopt);
    EXPECT_EQ(detect_tool_call_format(src("gemma")), std::nullopt);
}
