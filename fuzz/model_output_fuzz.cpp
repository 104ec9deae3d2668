// libFuzzer entry for the parsers of a model's own output (chat/tool_calls.h, chat/reasoning.h,
// chat/harmony.h): the streaming ToolCallParser of every format, with and without a tools array,
// and the ReasoningSplitter of every reasoning format. The text is built from the formats' markers
// and JSON / XML pieces the bytes pick (so calls open, close and break in every state), plus raw
// bytes; it is then cut into pieces at points the bytes pick.
// Oracles, as the headers promise: nothing throws; the pieces' concatenated content and calls equal
// parse_tool_calls() of the whole text, byte for byte; the splitters' streamed reasoning and content
// equal the whole text's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "fuzz/fuzz_support.h"

using namespace pagoda;
using chat::ToolCallFormat;

namespace {

// The markers of every format and the pieces calls are made of.
const std::vector<std::string> kPieces = {
    "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<function=", "</function>", "<parameter=",
    "</parameter>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>", "function", "<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>", "to=functions.",
    "assistant", "analysis", "commentary", "final", " <|constrain|>json", "```json\n", "```", "<minimax:tool_call>",
    "</minimax:tool_call>", "<invoke name=\"", "</invoke>", "<parameter name=\"", "\">", "<|tool_call>", "<tool_call|>",
    "call:", "<|\"|>", "<think>", "</think>", "<|channel>", "<channel|>", "thought\n", "{\"name\": \"", "\"get_weather\"",
    "get_weather", "noop", "\"arguments\": ", "\"parameters\": ", "{", "}", "[", "]", "\"", ":", ",", ";", "\n", " ",
    "\\", "\\u00e9", "null", "true", "12", "-3.5e2", "\"city\"", "city", "Paris", "é", "\xf0\x9f\x98\x80", "\xff",
};

std::string build_text(FuzzedDataProvider& p) {
    std::string text;
    const size_t n = p.ConsumeIntegralInRange<size_t>(0, 48);
    for (size_t i = 0; i < n && p.remaining_bytes() > 0; ++i) {
        if (p.ConsumeIntegralInRange<int>(0, 7) == 0) text += p.ConsumeRandomLengthString(24);
        else text += kPieces[p.ConsumeIntegralInRange<size_t>(0, kPieces.size() - 1)];
    }
    return text;
}

std::vector<std::string> cut(FuzzedDataProvider& p, const std::string& text) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
        const size_t n = p.remaining_bytes() > 0 ? p.ConsumeIntegralInRange<size_t>(1, 9) : text.size() - at;
        pieces.push_back(text.substr(at, n));
        at += n;
    }
    return pieces;
}

void check_tool_calls(ToolCallFormat format, const nlohmann::json& tools, const std::string& text,
                      const std::vector<std::string>& pieces) {
    try {
        const chat::ParsedToolCalls whole = chat::parse_tool_calls(text, format, tools);
        chat::ToolCallParser parser(format, tools);
        std::string content;
        std::vector<chat::ToolCall> calls;
        for (const std::string& piece : pieces) {
            const chat::ToolCallParts part = parser.feed(piece);
            content += part.content;
            chat::collect_tool_calls(calls, part.calls);
        }
        const chat::ToolCallParts last = parser.finish();
        content += last.content;
        chat::collect_tool_calls(calls, last.calls);
        if (content != whole.content) fuzz::fail_check("tool calls: streamed content differs from the whole text's");
        if (calls.size() != whole.calls.size()) fuzz::fail_check("tool calls: streamed call count differs");
        for (size_t i = 0; i < calls.size(); ++i)
            if (calls[i].name != whole.calls[i].name || calls[i].arguments != whole.calls[i].arguments)
                fuzz::fail_check("tool calls: a streamed call differs from the whole text's");
        if (parser.calls_seen() != calls.size()) fuzz::fail_check("tool calls: calls_seen() is not the calls given");
    } catch (const std::exception& e) {
        fuzz::unexpected("tool-call parsing (never throws)", e);
    }
}

void check_reasoning(chat::ReasoningFormat format, bool open, const std::string& text, const std::vector<std::string>& pieces) {
    try {
        chat::ReasoningSplitter whole_splitter(format, open);
        const chat::ReasoningParts whole = chat::split_whole(whole_splitter, text);
        chat::ReasoningSplitter splitter(format, open);
        chat::ReasoningParts streamed;
        for (const std::string& piece : pieces) {
            const chat::ReasoningParts part = splitter.feed(piece);
            streamed.reasoning += part.reasoning;
            streamed.content += part.content;
        }
        const chat::ReasoningParts last = splitter.finish();
        streamed.reasoning += last.reasoning;
        streamed.content += last.content;
        if (streamed.reasoning != whole.reasoning || streamed.content != whole.content)
            fuzz::fail_check("reasoning: the streamed split differs from the whole text's");
        if (format == chat::ReasoningFormat::deepseek) {
            const chat::ReasoningParts direct = chat::split_reasoning(text, open);
            if (direct.reasoning != whole.reasoning || direct.content != whole.content)
                fuzz::fail_check("reasoning: split_reasoning differs from the splitter");
        }
    } catch (const std::exception& e) {
        fuzz::unexpected("reasoning split (never throws)", e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    fuzz::JsonGen gen(p);
    static const ToolCallFormat kFormats[] = {ToolCallFormat::hermes,      ToolCallFormat::llama3_json,
                                              ToolCallFormat::mistral,     ToolCallFormat::qwen3_coder,
                                              ToolCallFormat::deepseek_v3, ToolCallFormat::harmony,
                                              ToolCallFormat::gemma4,      ToolCallFormat::minimax_m2};
    const ToolCallFormat format = kFormats[p.ConsumeIntegralInRange<size_t>(0, std::size(kFormats) - 1)];
    const nlohmann::json tools = p.ConsumeBool() ? gen.tools() : nlohmann::json();
    const std::string text = build_text(p);
    const std::vector<std::string> pieces = cut(p, text);
    check_tool_calls(format, tools, text, pieces);
    static const chat::ReasoningFormat kReasoning[] = {chat::ReasoningFormat::deepseek, chat::ReasoningFormat::harmony,
                                                       chat::ReasoningFormat::gemma4};
    for (chat::ReasoningFormat r : kReasoning) check_reasoning(r, size % 2 == 1, text, pieces);
    return 0;
}
