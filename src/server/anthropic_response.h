// Anthropic Messages responses, built from the Chat Completions chunks the ResponseAssembler already
// makes for the request (one choice), so /v1/messages shares the reasoning split and tool-call
// parsing of /v1/chat/completions. MessageBuilder turns each chunk's delta into Anthropic stream
// events and keeps the message they add up to, so the non-streamed message is exactly what the
// stream reassembles to:
//   reasoning_content -> a thinking block (thinking_delta), content -> a text block (text_delta),
//   a tool call's first delta (it has an id) -> a tool_use block; its arguments, and any later
//   argument pieces for the same call, -> input_json_delta (whatever size the parser gives them).
// A new kind of output closes the open block (content_block_stop) and opens the next. finish()
// closes the last block and adds message_delta (stop_reason, stop_sequence, usage) and
// message_stop. Stream events are JSON objects whose "type" is also the SSE event name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace pagoda::server {

class MessageBuilder {
public:
    MessageBuilder(std::string id, std::string model, int64_t input_tokens);

    // Streaming: message_start.
    std::vector<nlohmann::json> opening_events() const;
    // One chat.completion.chunk (choices[0].delta and finish_reason) -> its events. `stop_string`:
    // the stop sequence that ended the output, when one did (known with the finishing chunk).
    std::vector<nlohmann::json> add_chunk(const nlohmann::json& chunk, const std::string& stop_string = {});
    // Once the output is complete: the closing events.
    std::vector<nlohmann::json> finish(int64_t input_tokens, int64_t output_tokens);

    // The message so far (the whole response once finish() ran).
    nlohmann::json message() const;

private:
    void close_block(std::vector<nlohmann::json>& out);
    void open_block(nlohmann::json block, std::vector<nlohmann::json>& out);
    void delta(nlohmann::json d, std::vector<nlohmann::json>& out);

    std::string id_, model_;
    int64_t input_tokens_ = 0, output_tokens_ = 0;
    nlohmann::json content_ = nlohmann::json::array();
    std::optional<size_t> open_;                 // index of the open block
    std::vector<std::string> tool_arguments_;    // per block: the tool_use input's JSON text so far
    std::vector<int64_t> tool_index_;            // per block: the chat tool-call index (-1: not a tool)
    std::optional<std::string> stop_reason_, stop_sequence_;
};

// end_turn, max_tokens, stop_sequence or tool_use for a chat finish_reason (stop, length,
// tool_calls); `stop_string` non-empty turns stop into stop_sequence.
const char* anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_string);

// {"type":"error","error":{"type":..., "message":...}} with Anthropic's type for e.status:
// 400 invalid_request_error, 401 authentication_error, 403 permission_error, 404 not_found_error,
// 413 request_too_large, 429 rate_limit_error, 503 overloaded_error, other 5xx api_error.
nlohmann::json anthropic_error_body(const ApiError& e);

// The SSE frame of a stream event: "event: <type>\ndata: <json>\n\n".
std::string anthropic_sse(const nlohmann::json& event);

}  // namespace pagoda::server
