// Which syntax a model writes tool calls in, chosen from its chat template's text (the template is
// what taught the model, so its markers say what the model will emit). The rule, first match wins:
//   "<｜tool▁calls▁begin｜>" in the template  -> deepseek_v3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
//                                                <｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   "<|channel|>" and "<|message|>"           -> harmony (gpt-oss): <|channel|>commentary to=functions.NAME
//                                                <|constrain|>json<|message|>{…}<|call|>
//   "<function=" and "<parameter="            -> qwen3_coder: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n
//                                                </parameter>\n…</function>\n</tool_call> (values typed by the schema)
//   "[TOOL_CALLS]"                            -> mistral: [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
//   "<tool_call>"                             -> hermes:  <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//                                                (Qwen 2.5 / Qwen 3, Hermes, pagoda's builtin chatml)
//   "<|python_tag|>" or "ipython"             -> llama3_json: {"name": …, "parameters": {…}} (Llama 3.1+)
//   otherwise                                 -> none: the template cannot render tools (requests with
//                                                tools are refused rather than silently losing them)
#pragma once
#include <optional>
#include <string_view>

namespace pagoda::chat {

enum class ToolCallFormat { hermes, llama3_json, mistral, qwen3_coder, deepseek_v3, harmony };

// "hermes", "llama3_json", "mistral", "qwen3_coder", "deepseek_v3", "harmony"
const char* tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);

}  // namespace pagoda::chat
