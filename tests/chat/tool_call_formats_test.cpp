// Tool calls streamed as argument deltas, and the tagged formats (Qwen3-Coder XML, MiniMax-M2 XML,
// DeepSeek V3, gpt-oss harmony): exact whole-output goldens, look-alikes that stay content, template detection,
// and for every format the streaming invariant over random token-size chunkings: the deltas name
// each call once, in index order, before any of its arguments, and concatenate to exactly the
// arguments the whole parse returns; arguments flow before the call's closing marker arrives.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <random>

#include "chat/tool_calls.h"
#include "tool_call_stream.h"

using namespace pagoda::chat;
using json = nlohmann::json;

namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"},
     "tags": {"type": ["array", "null"]}, "note": {"type": ["string", "null"]}}}}},
  {"type": "function", "function": {"name": "noop"}}
])");

struct Case {
    ToolCallFormat format;
    std::string text;
    std::string content;
    std::vector<ToolCall> calls;
};

const std::vector<Case>& cases() {
    using F = ToolCallFormat;
    static const std::vector<Case> c = {
        {F::qwen3_coder,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
         "<parameter=opts>\n{\"unit\": \"C\", \"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>",
         "",
         {{"get_weather", R"({"city":"Paris","days":3,"opts":{"unit":"C","a":[1,2]}})"}}},
        {F::qwen3_coder,
         "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\na < b\n\"quoted\"\n</parameter>\n"
         "<parameter=days>\nthree\n</parameter>\n<parameter=tags>\n[\"x\"]\n</parameter>\n<parameter=note>\n7\n</parameter>\n"
         "</function>\n</tool_call>\n<tool_call>\n<function=noop>\n</function>\n</tool_call>",
         "Let me look.",
         {{"get_weather", R"({"city":"a < b\n\"quoted\"","days":"three","tags":["x"],"note":"7"})"}, {"noop", "{}"}}},
        // A parameter left open runs to the next one; a call cut off closes what it has.
        {F::qwen3_coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2",
         "",
         {{"get_weather", R"({"city":"Oslo","days":2})"}}},
        {F::qwen3_coder, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", {{"noop", R"({"a":1})"}}},
        {F::qwen3_coder, "<tool_call>\n<function=bad name\n>", "<tool_call>\n<function=bad name\n>", {}},
        {F::qwen3_coder, "x <tool_call>\n<func", "x <tool_call>\n<func", {}},
        {F::deepseek_v3,
         "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", "
         "\"days\": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>noop\n```json\n{}\n```"
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "Sure.",
         {{"get_weather", R"({"city":"Paris","days":2})"}, {"noop", "{}"}}},
        // DeepSeek V3.1's form: NAME<｜tool▁sep｜>{arguments}.
        {F::deepseek_v3,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"}```\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "",
         {{"get_weather", R"({"city":"}```"})"}}},
        {F::deepseek_v3, "<｜tool▁calls▁begin｜>nothing", "<｜tool▁calls▁begin｜>nothing", {}},
        {F::deepseek_v3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Pa",
         "",
         {{"get_weather", R"({"city":"Pa)"}}},
        {F::harmony,
         "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
         "<|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
         "<|channel|>analysis<|message|>Need weather.<|end|>",
         {{"get_weather", R"({"city":"Paris"})"}}},
        // The recipient in the role (as gpt-oss's template renders history), two calls, <|call|> dropped
        // at the end (it ends generation).
        {F::harmony,
         "<|channel|>commentary to=functions.noop <|constrain|>json<|message|>{}<|call|><|start|>assistant to=functions.get_weather"
         "<|channel|>commentary json<|message|>{\"days\": 1}",
         "",
         {{"noop", "{}"}, {"get_weather", R"({"days":1})"}}},
        {F::harmony, "<|channel|>final<|message|>Hello there.", "<|channel|>final<|message|>Hello there.", {}},
        // MiniMax-M2: quoted names, any number of calls a block, values typed by the schema.
        {F::minimax_m2,
         "Let me check.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
         "<parameter name=\"days\">3</parameter>\n<parameter name=\"opts\">{\"unit\": \"C\", \"a\": [1, 2]}</parameter>\n"
         "</invoke>\n<invoke name=\"noop\">\n</invoke>\n</minimax:tool_call>",
         "Let me check.",
         {{"get_weather", R"({"city":"Paris","days":3,"opts":{"unit":"C","a":[1,2]}})"}, {"noop", "{}"}}},
        // A value's white space at both ends is not part of it (inside it is); an untyped or unparsable
        // value is a string; text after the block is content.
        {F::minimax_m2,
         "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">\n  New York\n\"City\" \n</parameter>\n"
         "<parameter name=\"days\">three</parameter>\n<parameter name=\"tags\"> [\"x\"] </parameter>\n"
         "<parameter name=\"note\">7</parameter>\n</invoke>\n</minimax:tool_call>\nDone.",
         "Done.",
         {{"get_weather", R"({"city":"New York\n\"City\"","days":"three","tags":["x"],"note":"7"})"}}},
        // Two blocks, single-quoted names; a parameter left open runs to the next one; a call cut off
        // closes what it has.
        {F::minimax_m2,
         "<minimax:tool_call><invoke name='noop'></invoke></minimax:tool_call> and <minimax:tool_call>\n"
         "<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo\n<parameter name=\"days\">2",
         "and",
         {{"noop", "{}"}, {"get_weather", R"({"city":"Oslo","days":2})"}}},
        // Look-alikes stay content, byte for byte.
        {F::minimax_m2, "<minimax:tool_call>\nnothing", "<minimax:tool_call>\nnothing", {}},
        {F::minimax_m2, "<minimax:tool_call>\n<invoke name=\"bad\nname\">", "<minimax:tool_call>\n<invoke name=\"bad\nname\">", {}},
        {F::minimax_m2, "<minimax:tool_call></minimax:tool_call>", "<minimax:tool_call></minimax:tool_call>", {}},
        {F::minimax_m2, "x <minimax:tool_c", "x <minimax:tool_c", {}},
    };
    return c;
}

ParsedToolCalls stream(const std::string& text, const std::vector<size_t>& cuts, ToolCallFormat format,
                       size_t* argument_deltas = nullptr) {
    ToolCallParser p(format, kTools);
    return stream_tool_calls(p, text, cuts, argument_deltas);
}

void expect_result(const ParsedToolCalls& r, const Case& c, const std::string& what) {
    EXPECT_EQ(r.content, c.content) << what;
    ASSERT_EQ(r.calls.size(), c.calls.size()) << what;
    for (size_t i = 0; i < r.calls.size(); ++i) {
        EXPECT_EQ(r.calls[i].name, c.calls[i].name) << what;
        EXPECT_EQ(r.calls[i].arguments, c.calls[i].arguments) << what;
    }
}

}  // namespace

TEST(ToolCallFormats, WholeOutputs) {
    for (const auto& c : cases()) expect_result(parse_tool_calls(c.text, c.format, kTools), c, c.text);
}

TEST(ToolCallFormats, ArgumentsParseAsJsonWhenTheCallIsWhole) {
    for (const auto& c : cases())
        for (const auto& call : c.calls) {
            if (c.text.find("\"Pa") != std::string::npos) continue;  // the cut-off call
            EXPECT_FALSE(json::parse(call.arguments, nullptr, false).is_discarded()) << call.arguments;
        }
}

TEST(ToolCallFormats, RandomTokenSizeChunkingsStreamTheSameCalls) {
    std::mt19937 rng(45);
    for (const auto& c : cases()) {
        for (int iter = 0; iter < 200; ++iter) {
            std::vector<size_t> cuts;
            for (size_t i = 1 + rng() % 6; i < c.text.size(); i += 1 + rng() % 6) cuts.push_back(i);
            expect_result(stream(c.text, cuts, c.format), c, c.text);
        }
        std::vector<size_t> every;
        for (size_t i = 1; i < c.text.size(); ++i) every.push_back(i);
        expect_result(stream(c.text, every, c.format), c, c.text + " (byte by byte)");
    }
}

// Fed token by token, a call's arguments arrive in many pieces, and before its closing marker.
TEST(ToolCallFormats, ArgumentsFlowBeforeTheCallCloses) {
    using F = ToolCallFormat;
    struct Flow {
        F format;
        std::string head, args, tail;  // the call is head + args + tail; args stream as written
        std::string expected;          // the arguments that must be out once head + args was fed
    };
    const std::vector<Flow> flows = {
        {F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Paris, France\", \"days\": 12",
         "}}\n</tool_call>", R"({"city":"Paris, France","days":12)"},
        {F::mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Paris, France\"", "}}]",
         R"({"city":"Paris, France")"},
        {F::llama3_json, "{\"name\": \"get_weather\", \"parameters\": ", "{\"city\": \"Paris, France\"", "}}",
         R"({"city":"Paris, France")"},
        {F::qwen3_coder, "<tool_call>\n<function=get_weather>\n", "<parameter=city>\nParis, France and more",
         "\n</parameter>\n</function>\n</tool_call>", R"({"city":"Paris, France and more)"},
        {F::deepseek_v3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
         "{\"city\": \"Paris, France\"", "}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", R"({"city":"Paris, France")"},
        {F::harmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
         "{\"city\": \"Paris, France\"", "}<|call|>", R"({"city":"Paris, France")"},
        {F::minimax_m2, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n", "<parameter name=\"city\">Paris, France and more",
         " </parameter>\n</invoke>\n</minimax:tool_call>", R"({"city":"Paris, France and more)"},
    };
    for (const auto& f : flows) {
        ToolCallParser p(f.format, kTools);
        std::vector<ToolCall> calls;
        size_t pieces = 0;
        const std::string upto = f.head + f.args;
        for (size_t i = 0; i < upto.size(); i += 3) {
            const ToolCallParts part = p.feed(std::string_view(upto).substr(i, 3));
            EXPECT_EQ(part.content, "") << f.head;
            for (const auto& d : part.calls) pieces += !d.arguments.empty();
            collect_tool_calls(calls, part.calls);
        }
        ASSERT_EQ(calls.size(), 1u) << f.head << ": named before it closes";
        EXPECT_EQ(calls[0].name, "get_weather");
        EXPECT_EQ(calls[0].arguments, f.expected) << f.head;
        EXPECT_GE(pieces, 4u) << f.head << ": the arguments came in pieces";
        collect_tool_calls(calls, p.feed(f.tail).calls);
        collect_tool_calls(calls, p.finish().calls);
        EXPECT_EQ(calls[0].arguments, parse_tool_calls(f.head + f.args + f.tail, f.format, kTools).calls.at(0).arguments);
    }
}

TEST(ToolCallFormats, NothingAmbiguousIsEmitted) {
    using F = ToolCallFormat;
    const std::pair<F, std::string> held[] = {
        {F::hermes, "<tool_ca"}, {F::qwen3_coder, "<tool_call>\n<function=get_wea"},
        {F::hermes, "<tool_call>\n{\"arguments\": {\"a\": 1}, \"na"}, {F::mistral, "[TOOL_CALLS][{\"name\": \"f\""},
        {F::deepseek_v3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_wea"},
        {F::harmony, "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>js"},
        {F::llama3_json, "<|python"},
        {F::minimax_m2, "<minimax:tool_call>\n<invoke name=\"get_wea"},
        {F::minimax_m2, "<minimax:tool"},
    };
    for (const auto& [format, text] : held) {
        ToolCallParser p(format, kTools);
        const ToolCallParts part = p.feed(text);
        EXPECT_EQ(part.content, "") << text;
        EXPECT_TRUE(part.calls.empty()) << text;
    }
}

TEST(ToolCallFormats, DetectedFromTemplateMarkers) {
    EXPECT_EQ(detect_tool_call_format("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type']}}"),
              ToolCallFormat::deepseek_v3);
    EXPECT_EQ(detect_tool_call_format("{{- \"<|start|>assistant to=\" }}{{- \"functions.\" + tool_call.name + "
                                      "\"<|channel|>commentary \" }}{{ \"<|message|>\" }}"),
              ToolCallFormat::harmony);
    EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
                                      "{{- '<parameter=' + args_name + '>\\n' }}"),
              ToolCallFormat::qwen3_coder);
    EXPECT_EQ(detect_tool_call_format("<tool_call>\\n{\"name\": ...}"), ToolCallFormat::hermes);
    // MiniMax-M2's template sets its markers as variables and writes <parameter name=…> (not Qwen's <parameter=).
    EXPECT_EQ(detect_tool_call_format("{%- set toolcall_begin_token = '<minimax:tool_call>' -%}{{ toolcall_begin_token }}"
                                      "<invoke name=\"{{ tool_call.name }}\"><parameter name=\"{{ k }}\">"),
              ToolCallFormat::minimax_m2);
}
