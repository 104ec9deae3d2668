#include "chat/tool_call_format.h"

namespace pagoda::chat {

const char* tool_call_format_name(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::hermes: return "hermes";
        case ToolCallFormat::llama3_json: return "llama3_json";
        case ToolCallFormat::mistral: return "mistral";
        case ToolCallFormat::qwen3_coder: return "qwen3_coder";
        case ToolCallFormat::deepseek_v3: return "deepseek_v3";
        case ToolCallFormat::harmony: return "harmony";
        case ToolCallFormat::gemma4: return "gemma4";
        case ToolCallFormat::minimax_m2: return "minimax_m2";
    }
    return "hermes";
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view source) {
    auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
    // The more specific markers first: Qwen3-Coder's template also writes <tool_call>, and gpt-oss's,
    // DeepSeek's and MiniMax's mention no other format's markers.
    if (has("<minimax:tool_call>")) return ToolCallFormat::minimax_m2;
    if (has("<｜tool▁calls▁begin｜>")) return ToolCallFormat::deepseek_v3;
    if (has("<|tool_call>")) return ToolCallFormat::gemma4;
    if (has("<|channel|>") && has("<|message|>")) return ToolCallFormat::harmony;
    if (has("<function=") && has("<parameter=")) return ToolCallFormat::qwen3_coder;
    if (has("[TOOL_CALLS]")) return ToolCallFormat::mistral;
    if (has("<tool_call>")) return ToolCallFormat::hermes;
    if (has("<|python_tag|>") || has("ipython")) return ToolCallFormat::llama3_json;
    return std::nullopt;
}

}  // namespace pagoda::chat
