// Which syntax a model writes tool calls in, chosen from its chat template's text (the template is
// what taught the model, so its markers say what the model will emit). The rule, first match wins:
//   "[TOOL_CALLS]" in the template            -> mistral: [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
//   "<tool_call>"                             -> hermes:  <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//                                                (Qwen 2.5 / Qwen 3, Hermes, pagoda's builtin chatml)
//   "<|python_tag|>" or "ipython"             -> llama3_json: {"name": …, "parameters": {…}} (Llama 3.1+)
//   otherwise                                 -> none: the template cannot render tools (requests with
//                                                tools are refused rather than silently losing them)
#pragma once
#include <optional>
#include <string_view>

namespace pagoda::chat {

enum class ToolCallFormat { hermes, llama3_json, mistral };

const char* tool_call_format_name(ToolCallFormat format);  // "hermes", "llama3_json", "mistral"
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);

}  // namespace pagoda::chat
