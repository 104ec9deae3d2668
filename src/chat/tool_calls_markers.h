// The marker texts of the tool-call formats (chat/tool_call_format.h), and how a text's start
// compares with one, for the streaming parser (private to chat/tool_calls*.cpp).
#pragma once
#include <string_view>
#include <vector>

#include "chat/text_scan.h"
#include "chat/tool_call_format.h"
#include "chat/tool_call_gemma4.h"

namespace pagoda::chat {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
constexpr std::string_view kHarmonyStart = "<|start|>";
constexpr std::string_view kHarmonyChannel = "<|channel|>";
constexpr std::string_view kHarmonyMessage = "<|message|>";
constexpr std::string_view kHarmonyCall = "<|call|>";
constexpr std::string_view kHarmonyRecipient = "to=functions.";
constexpr std::string_view kFence = "```";
constexpr std::string_view kMinimaxOpen = "<minimax:tool_call>";
constexpr std::string_view kMinimaxClose = "</minimax:tool_call>";
constexpr std::string_view kInvokeOpen = "<invoke name=";
constexpr std::string_view kInvokeClose = "</invoke>";
constexpr std::string_view kNamedParameterOpen = "<parameter name=";

// The XML call syntaxes: Qwen3-Coder's <function=NAME>…<parameter=P>\nVALUE\n</parameter>…</function>
// inside <tool_call>, one call a block, a value's one newline at each end not part of it; MiniMax-M2's
// <invoke name="NAME">…<parameter name="P">VALUE</parameter>…</invoke>, any number a
// <minimax:tool_call> block, names quoted and a value's white space at both ends not part of it.
struct XmlSyntax {
    std::string_view call_open, call_close, param_open, block_close;
    bool minimax = false;
};
inline const XmlSyntax& xml_syntax(ToolCallFormat format) {
    static const XmlSyntax qwen{kFunctionOpen, kFunctionClose, kParameterOpen, kHermesClose, false},
        minimax{kInvokeOpen, kInvokeClose, kNamedParameterOpen, kMinimaxClose, true};
    return format == ToolCallFormat::minimax_m2 ? minimax : qwen;
}

// What opens a call (or a list of them) in running text.
inline const std::vector<std::string_view>& opening_markers(ToolCallFormat format) {
    static const std::vector<std::string_view> hermes = {kHermesOpen}, mistral = {kMistralMarker},
                                               deepseek = {kDsCallsBegin}, harmony = {kHarmonyStart, kHarmonyChannel},
                                               gemma4 = {kGemma4CallOpen}, minimax = {kMinimaxOpen}, none = {};
    switch (format) {
        case ToolCallFormat::hermes:
        case ToolCallFormat::qwen3_coder: return hermes;
        case ToolCallFormat::mistral: return mistral;
        case ToolCallFormat::deepseek_v3: return deepseek;
        case ToolCallFormat::harmony: return harmony;
        case ToolCallFormat::gemma4: return gemma4;
        case ToolCallFormat::minimax_m2: return minimax;
        case ToolCallFormat::llama3_json: return none;
    }
    return none;
}

enum class Match { yes, partial, no };

// Whether `s` starts with `marker` (yes), could still (partial: s is a proper prefix and more text
// may come), or cannot (no).
inline Match match(std::string_view s, std::string_view marker, bool final) {
    if (starts_with(s, marker)) return Match::yes;
    if (!final && s.size() < marker.size() && starts_with(marker, s)) return Match::partial;
    return Match::no;
}

}  // namespace pagoda::chat
