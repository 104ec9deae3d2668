// Tool calling for a chat request, once the chat template is known: which tool-call format the
// template teaches (chat/tool_call_format.h; a request with tools on a template that has none is a
// 400 rather than tools silently missing from the prompt), and for tool_choice "required" or a named
// function the grammar every choice is constrained to: the format's call syntax around each allowed
// function's name and its arguments — the `parameters` JSON schema (compiled by grammar/json_schema;
// a keyword it cannot enforce is a 400 naming tools[i].function.parameters), or for Qwen3-Coder's
// XML one <parameter=P> block per property (required ones always, string values as free text
// without '<' or one of a string enum, others as JSON under the property's schema). With
// tool_choice "auto" the output is free and parsed afterwards; "none" neither constrains nor parses.
#pragma once
#include <memory>
#include <optional>

#include "chat/tool_call_format.h"
#include "grammar/grammar.h"
#include "server/openai_request.h"

namespace pagoda::chat {
class ChatTemplate;
}

namespace pagoda::server {

// The format to parse the output with (nullopt: no parsing: no tools, or tool_choice none); sets
// p.grammar for a forced tool_choice. Throws ApiError.
std::optional<chat::ToolCallFormat> apply_tools(CompletionParams& p, const chat::ChatTemplate* chat_template);

// The grammar of one or more calls (one when !parallel) to the functions in `tools` (only the one
// named `only`, when not empty). Throws ApiError (400) for a schema the compiler cannot enforce.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(chat::ToolCallFormat format, const nlohmann::ordered_json& tools,
                                                          const std::string& only, bool parallel);

}  // namespace pagoda::server
