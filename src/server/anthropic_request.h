// The body of Anthropic's POST /v1/messages and /v1/messages/count_tokens, checked and translated
// into the Chat Completions body the rest of the server already serves, so a Messages request goes
// through the one chat pipeline (parse_completion_request -> tools -> chat template -> engine):
//   system (string or text blocks)        -> a leading system message
//   text blocks                           -> the message's content (joined)
//   assistant tool_use blocks             -> tool_calls (input as JSON text)
//   user tool_result blocks               -> tool messages (before the user's other text)
//   assistant thinking blocks             -> reasoning_content (templates that show past thinking)
//   a final assistant message (prefill)   -> continue_final_message (the model continues its text)
//   tools [{name, description, input_schema}] -> function tools; tool_choice auto/any/tool/none ->
//   auto/required/named/none, disable_parallel_tool_use -> parallel_tool_calls false;
//   stop_sequences -> stop; thinking enabled/disabled -> chat_template_kwargs.enable_thinking.
// Every top-level field is in anthropic_request_fields() (docs/api.md has the same table); any other
// is refused, as are block types and tool types that are not served (images, documents, server
// tools), each with an ApiError 400 naming the field by its Anthropic path.
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_fields.h"

namespace pagoda::server {

enum class MessagesRoute { messages, count_tokens };

// The fields of either route (RequestField::completions means /v1/messages, ::chat count_tokens).
const std::vector<RequestField>& anthropic_request_fields();

struct AnthropicRequest {
    nlohmann::ordered_json chat_body;      // the equivalent /v1/chat/completions body (tool schemas in
                                           // the order sent, where the caller gave the ordered body)
    std::optional<bool> thinking;          // thinking.type enabled (true) / disabled (false); unset: absent
    std::vector<std::string> message_origin;  // per chat_body message: the Anthropic path it came from

    // The chat parser's name for a field of chat_body -> the Anthropic field it came from
    // (stop -> stop_sequences, tools[i].function.parameters -> tools[i].input_schema,
    // messages[k]... -> the message or block that became message k, ...).
    std::string param(const std::string& chat_param) const;
};

// Throws ApiError 400 on the first problem.
// `ordered`: the same body with its keys in the order sent, where the caller has it: tool
// input_schemas then keep their properties' order (the order a forced call's arguments follow).
AnthropicRequest translate_anthropic_request(const nlohmann::json& body, MessagesRoute route,
                                             const nlohmann::ordered_json* ordered = nullptr);

}  // namespace pagoda::server
