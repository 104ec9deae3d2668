// MessageBuilder: chat chunks -> Anthropic stream events, exactly; the message the events add up to
// (thinking, text and tool_use blocks, partial tool arguments joined and parsed), stop reasons, the
// error shape per status and the SSE framing.
#include "server/anthropic_response.h"

#include <gtest/gtest.h>

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

json chunk(json delta, json finish = nullptr) {
    return {{"id", "chatcmpl-x"},
            {"object", "chat.completion.chunk"},
            {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
}

std::vector<json> feed(MessageBuilder& b, const std::vector<json>& chunks, const std::string& stop_string = {}) {
    std::vector<json> out;
    for (const auto& c : chunks)
        for (auto& e : b.add_chunk(c, stop_string)) out.push_back(std::move(e));
    return out;
}

}  // namespace

TEST(AnthropicResponse, ThinkingTextAndAToolCallStreamAsBlocks) {
    MessageBuilder b("msg_abc", "m", 7);
    EXPECT_EQ(json(b.opening_events()), json::parse(R"([{"type": "message_start", "message": {
        "id": "msg_abc", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 7, "output_tokens": 0}}}])"));
    // A tool call's arguments in pieces, as a parser that streams them would send them.
    std::vector<json> events = feed(
        b, {chunk({{"reasoning_content", "hm"}}),
            chunk({{"reasoning_content", "m"}, {"content", "Hi"}}),
            chunk({{"content", "!"}}),
            chunk({{"tool_calls", json::parse(R"([{"index": 0, "id": "call_1", "type": "function",
                                                    "function": {"name": "f", "arguments": "{\"a\":"}}])")}}),
            chunk({{"tool_calls", json::parse(R"([{"index": 0, "function": {"arguments": "1}"}}])")}}),
            chunk(json::object(), "tool_calls")});
    for (auto& e : b.finish(7, 5)) events.push_back(std::move(e));
    const json want = json::parse(R"([
      {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
      {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
      {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "m"}},
      {"type": "content_block_stop", "index": 0},
      {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
      {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
      {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "!"}},
      {"type": "content_block_stop", "index": 1},
      {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_abc_0", "name": "f", "input": {}}},
      {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}},
      {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "1}"}},
      {"type": "content_block_stop", "index": 2},
      {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
       "usage": {"input_tokens": 7, "output_tokens": 5}},
      {"type": "message_stop"}
    ])");
    EXPECT_EQ(json(events), want) << json(events).dump(1);
    EXPECT_EQ(b.message(), json::parse(R"({
      "id": "msg_abc", "type": "message", "role": "assistant", "model": "m",
      "content": [{"type": "thinking", "thinking": "hmm", "signature": ""}, {"type": "text", "text": "Hi!"},
                  {"type": "tool_use", "id": "toolu_abc_0", "name": "f", "input": {"a": 1}}],
      "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 7, "output_tokens": 5}})"));
}

TEST(AnthropicResponse, ParallelCallsEachGetABlock) {
    MessageBuilder b("msg_p", "m", 1);
    feed(b, {chunk({{"tool_calls", json::parse(R"([
        {"index": 0, "id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"index": 1, "id": "c1", "type": "function", "function": {"name": "g", "arguments": "{\"x\":[1]}"}}])")}},
                   "tool_calls")});
    b.finish(1, 2);
    const json content = b.message()["content"];
    ASSERT_EQ(content.size(), 2u);
    EXPECT_EQ(content[0], json::parse(R"({"type": "tool_use", "id": "toolu_p_0", "name": "f", "input": {}})"));
    EXPECT_EQ(content[1], json::parse(R"({"type": "tool_use", "id": "toolu_p_1", "name": "g", "input": {"x": [1]}})"));
}

TEST(AnthropicResponse, StopReasons) {
    auto reason = [](const char* finish, const std::string& stop_string) {
        MessageBuilder b("msg_s", "m", 1);
        feed(b, {chunk({{"content", "a"}}), chunk(json::object(), finish)}, stop_string);
        b.finish(1, 1);
        return std::make_pair(b.message()["stop_reason"], b.message()["stop_sequence"]);
    };
    EXPECT_EQ(reason("stop", ""), std::make_pair(json("end_turn"), json(nullptr)));
    EXPECT_EQ(reason("stop", "END"), std::make_pair(json("stop_sequence"), json("END")));
    EXPECT_EQ(reason("length", ""), std::make_pair(json("max_tokens"), json(nullptr)));
    EXPECT_EQ(reason("tool_calls", ""), std::make_pair(json("tool_use"), json(nullptr)));
}

TEST(AnthropicResponse, NothingGeneratedIsAMessageWithoutBlocks) {
    MessageBuilder b("msg_e", "m", 3);
    std::vector<json> events = feed(b, {chunk(json::object(), "length")});
    EXPECT_TRUE(events.empty());
    events = b.finish(3, 0);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0]["type"], "message_delta");
    EXPECT_EQ(b.message()["content"], json::array());
}

TEST(AnthropicResponse, ArgumentsThatAreNotJsonStayText) {
    MessageBuilder b("msg_t", "m", 1);
    feed(b, {chunk({{"tool_calls", json::parse(R"([{"index": 0, "id": "c", "type": "function",
                                                    "function": {"name": "f", "arguments": "not json"}}])")}},
                   "tool_calls")});
    EXPECT_EQ(b.message()["content"][0]["input"], "not json");
}

TEST(AnthropicResponse, ErrorsTakeAnthropicsShapeAndTypes) {
    EXPECT_EQ(anthropic_error_body(ApiError::invalid("bad", "x")),
              json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
    const std::vector<std::pair<ApiError, std::string>> cases = {
        {ApiError::unauthorized("k"), "authentication_error"},
        {ApiError::not_found("n"), "not_found_error"},
        {ApiError::method_not_allowed("m"), "invalid_request_error"},
        {ApiError::too_large("t"), "request_too_large"},
        {ApiError::rate_limited("r", 1, "rate_limit_exceeded"), "rate_limit_error"},
        {ApiError::unavailable("u", "queue_full"), "overloaded_error"},
        {ApiError::internal("i"), "api_error"},
    };
    for (const auto& [e, type] : cases) EXPECT_EQ(anthropic_error_body(e)["error"]["type"], type) << e.status;
}

TEST(AnthropicResponse, EventsAreFramedWithTheirName) {
    EXPECT_EQ(anthropic_sse(json{{"type", "message_stop"}}), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    EXPECT_EQ(anthropic_sse(anthropic_error_body(ApiError::internal("x"))),
              "event: error\ndata: {\"error\":{\"message\":\"x\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n");
}
