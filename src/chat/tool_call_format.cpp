#include "chat/tool_call_format.h"

namespace pagoda::chat {

const char* tool_call_format_name(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::hermes: return "hermes";
        case ToolCallFormat::llama3_json: return "llama3_json";
        case ToolCallFormat::mistral: return "mistral";
    }
    return "hermes";
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view source) {
    auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
    if (has("[TOOL_CALLS]")) return ToolCallFormat::mistral;
    if (has("<tool_call>")) return ToolCallFormat::hermes;
    if (has("<|python_tag|>") || has("ipython")) return ToolCallFormat::llama3_json;
    return std::nullopt;
}

}  // namespace pagoda::chat
