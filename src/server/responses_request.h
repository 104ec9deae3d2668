// Parses and validates the JSON body of POST /v1/responses (OpenAI's Responses API) without a model.
// Which top-level fields exist and what is done with each is responses_fields(); a field that is
// not acted on is refused with a 400 naming it, as are hosted tools (web_search, file_search,
// code_interpreter, ...), input items other than messages, function calls, function call outputs
// and reasoning, and content parts other than text. The request is then expressed as a
// /v1/chat/completions body (responses_chat_body), so it is rendered by the chat template and
// served by exactly the chat pipeline; map_chat_error() renames the chat fields in that pipeline's
// errors back to the Responses fields the client sent.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace pagoda::server {

// One top-level field of a Responses body, and what the server does with it (docs/api.md has the
// same table; a test compares them).
struct ResponsesField {
    std::string_view name;
    FieldUse use;
    std::string_view why;
};
const std::vector<ResponsesField>& responses_fields();

struct ResponsesRequest {
    std::string model;
    nlohmann::json input_items = nlohmann::json::array();  // validated items; a string input is one user message
    std::optional<std::string> instructions;
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // function tools as sent (Responses shape)
    nlohmann::json tool_choice = "auto";             // as sent
    bool parallel_tool_calls = true;
    nlohmann::ordered_json text_format = {{"type", "text"}};  // text.format as sent
    std::optional<int64_t> max_output_tokens;
    std::optional<double> temperature, top_p;
    bool stream = false;
    bool store = true;
    std::string previous_response_id;
    nlohmann::json metadata = nullptr;
    std::optional<std::string> user;
    // reasoning.summary "auto" / "detailed": the model's thinking goes out as the reasoning item's
    // summary; otherwise as its content (reasoning_text). It is the thinking verbatim either way.
    std::optional<std::string> reasoning_summary;
    std::string reasoning_effort;  // reasoning.effort: low, medium, high (chat's reasoning_effort) or empty
};

// Throws ApiError (400) on the first problem.
// `ordered`: the same body with its keys in the order sent, where the caller has it: the tools' and
// text.format's schemas then keep their properties' order (the order the output follows).
ResponsesRequest parse_responses_request(const nlohmann::json& body, const nlohmann::ordered_json* ordered = nullptr);

// The /v1/chat/completions body that asks for the same generation: `conversation` (the stored items
// of previous_response_id, then the request's input items) as messages after the instructions (a
// system message); tools, tool_choice, text.format (as response_format), max_output_tokens,
// temperature, top_p and stream under their chat names.
nlohmann::ordered_json responses_chat_body(const ResponsesRequest& r, const nlohmann::json& conversation);

// Conversation items -> chat messages: consecutive assistant output (message, function_call and the
// reasoning before them) becomes one assistant message with content, tool_calls and
// reasoning_content; function_call_output becomes a tool message.
// `first_item`, where given, receives per message the index of the item that opened it (a
// reasoning item before assistant output is not: the message, function call or output is).
nlohmann::json responses_items_to_messages(const nlohmann::json& items, std::vector<size_t>* first_item = nullptr);

// Where one message of responses_chat_body() came from, for errors that name it.
struct MessageOrigin {
    std::string path;        // "instructions", "input[i]" (i: the index in the request's input)
                             // or "previous_response_id" (an item stored by an earlier response)
    bool same_parts = false; // a user/system/developer message item: its content parts keep their indices
};

// Per message of responses_chat_body(r, conversation), where `conversation` is the
// `stored_items` items of previous_response_id followed by the request's input items.
std::vector<MessageOrigin> responses_message_origins(const ResponsesRequest& r, const nlohmann::json& conversation,
                                                     size_t stored_items);

// An error of the chat pipeline, its `param` (and the names in its message) renamed to the
// Responses field: max_completion_tokens -> max_output_tokens, response_format.json_schema ->
// text.format, tools[i].function.X -> tools[i].X, messages[k]... -> the origin of message k
// (input[i], with its .content[j]... where the parts kept their indices), or `input` where
// `origins` does not know k.
ApiError map_chat_error(ApiError e, const std::vector<MessageOrigin>& origins = {});

}  // namespace pagoda::server
