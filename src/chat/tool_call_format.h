// Which syntax a model writes tool calls in, chosen from its chat template's text (the template is
// what taught the model, so its markers say what the model will emit). The rule, first match wins:
//   "<minimax:tool_call>" in the template     -> minimax_m2: <minimax:tool_call>\n<invoke name="NAME">\n<parameter
//                                                name="P">VALUE</parameter>\n…</invoke>\n…</minimax:tool_call>
//                                                (MiniMax-M2; values typed by the schema as Qwen3-Coder's)
//   "<｜tool▁calls▁begin｜>" in the template  -> deepseek_v3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
//                                                <｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   "<|tool_call>"                            -> gemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
//                                                (Gemma 4's own notation, chat/tool_call_gemma4.h)
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

enum class ToolCallFormat { hermes, llama3_json, mistral, qwen3_coder, deepseek_v3, harmony, gemma4, minimax_m2 };

// "hermes", "llama3_json", "mistral", "qwen3_coder", "deepseek_v3", "harmony", "gemma4", "minimax_m2"
const char* tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view template_source);

}  // namespace pagoda::chat
