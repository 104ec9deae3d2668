// The Responses API's output, made from the chat pipeline's: ResponsesStream reads the
// chat.completion.chunk objects the ResponseAssembler produces for one choice and turns them into
// output items and the streaming events the official SDKs consume, each with its `type` and
// `sequence_number`:
//   response.created, response.in_progress, then per output item
//     reasoning:     output_item.added, (reasoning_summary_part.added, reasoning_summary_text.delta*,
//                    reasoning_summary_text.done, reasoning_summary_part.done) when a summary was asked
//                    for, else (content_part.added, reasoning_text.delta*, reasoning_text.done,
//                    content_part.done), output_item.done;
//     message:       output_item.added, content_part.added, output_text.delta*, output_text.done,
//                    content_part.done, output_item.done;
//     function_call: output_item.added, function_call_arguments.delta*, function_call_arguments.done,
//                    output_item.done;
//   and last response.completed, response.incomplete (max_output_tokens reached) or response.failed.
// Items follow the order of the chunks' pieces (reasoning, content, tool calls); a change of kind
// closes the open item. A tool call opens at the chunk that carries its id and name; every later
// argument fragment of the same call index is one arguments delta, so a parser that streams
// arguments in pieces flows through unchanged. The response object (response()) is the same
// whether the events were sent or not: non-streaming requests build it from the same chunks.
// Not thread-safe: one owner feeds it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// What the response object carries besides its output: the request's settings, echoed.
struct ResponsesContext {
    std::string id;          // "resp_..."
    int64_t created_at = 0;  // unix seconds
    std::string model;
    nlohmann::json instructions = nullptr;
    nlohmann::json max_output_tokens = nullptr;
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    nlohmann::json tool_choice = "auto";
    bool parallel_tool_calls = true;
    nlohmann::ordered_json text_format = {{"type", "text"}};
    nlohmann::json reasoning_summary = nullptr;  // "auto" / "detailed": thinking as summary parts
    double temperature = 1.0, top_p = 1.0;
    nlohmann::json previous_response_id = nullptr;
    bool store = true;
    nlohmann::json metadata = nullptr;
    nlohmann::json user = nullptr;
};

class ResponsesStream {
public:
    explicit ResponsesStream(ResponsesContext ctx);

    // response.created and response.in_progress (sequence numbers 0 and 1).
    const std::vector<nlohmann::json>& opening() const { return opening_; }
    // The events of one chat.completion.chunk (choice 0).
    std::vector<nlohmann::json> feed(const nlohmann::json& chunk);
    // Closes the open item and ends the response: `usage` is the chat usage object
    // (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens); `error` set: the
    // response failed with that message. Returns the remaining events, the final one last.
    std::vector<nlohmann::json> close(const nlohmann::json& chat_usage, const std::optional<std::string>& error);

    bool closed() const { return closed_; }
    const std::string& status() const { return status_; }  // in_progress, completed, incomplete, failed
    const nlohmann::json& output() const { return output_; }
    nlohmann::json response() const;  // the response object as it stands
    const ResponsesContext& context() const { return ctx_; }

private:
    enum class Kind { none, reasoning, message, function_call };
    nlohmann::json event(const char* type, nlohmann::json fields);
    void open_item(Kind kind, nlohmann::json item, std::vector<nlohmann::json>& out);
    void close_item(const char* status, std::vector<nlohmann::json>& out);
    void text_delta(Kind kind, const std::string& delta, std::vector<nlohmann::json>& out);
    std::string item_id(const char* prefix) const;

    ResponsesContext ctx_;
    std::vector<nlohmann::json> opening_;
    int64_t sequence_ = 0;
    nlohmann::json output_ = nlohmann::json::array();
    Kind open_ = Kind::none;
    int64_t open_call_index_ = -1;  // the chat tool_calls index of the open function_call
    std::string text_;              // the open item's text or arguments so far
    std::string finish_reason_;
    std::string status_ = "in_progress";
    nlohmann::json usage_ = nullptr;
    nlohmann::json error_ = nullptr;
    bool closed_ = false;
};

// One event on the wire: "event: <type>\ndata: <json>\n\n" (the SDKs read the type from either).
std::string responses_sse(const nlohmann::json& event);

}  // namespace pagoda::server
