// Chat chunks -> Responses events and response objects, against exact expected JSON: the event
// sequence the SDKs consume for reasoning, text and function calls (whole or in argument pieces),
// the incomplete and failed endings, and the response object built from the same chunks.
#include "server/responses_events.h"

#include <gtest/gtest.h>

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

ResponsesContext context() {
    ResponsesContext c;
    c.id = "resp_abc";
    c.created_at = 1700000000;
    c.model = "m";
    return c;
}

json chunk(json delta, json finish = nullptr) {
    return {{"id", "resp_abc"}, {"object", "chat.completion.chunk"},
            {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
}

const json kUsage = {{"prompt_tokens", 7}, {"completion_tokens", 5}, {"prompt_tokens_details", {{"cached_tokens", 2}}}};

// All events of a run: opening, each chunk's, closing.
std::vector<json> run(ResponsesStream& s, const std::vector<json>& chunks, std::optional<std::string> error = {}) {
    std::vector<json> all = s.opening();
    for (const json& c : chunks)
        for (json& e : s.feed(c)) all.push_back(std::move(e));
    for (json& e : s.close(kUsage, error)) all.push_back(std::move(e));
    return all;
}

// The event types in order, and that sequence numbers count up from 0.
std::vector<std::string> types(const std::vector<json>& events) {
    std::vector<std::string> t;
    for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i]["sequence_number"], i);
        t.push_back(events[i]["type"]);
    }
    return t;
}

}  // namespace

TEST(ResponsesEvents, ReasoningThenTextGiveTwoItemsWithTheirEvents) {
    ResponsesStream s(context());
    const auto events = run(s, {chunk({{"role", "assistant"}, {"content", ""}}), chunk({{"reasoning_content", "hm"}}),
                                chunk({{"reasoning_content", "m"}, {"content", "Hi"}}), chunk({{"content", "!"}}, "stop")});
    EXPECT_EQ(types(events), (std::vector<std::string>{
                                 "response.created", "response.in_progress", "response.output_item.added",
                                 "response.content_part.added", "response.reasoning_text.delta",
                                 "response.reasoning_text.delta", "response.reasoning_text.done",
                                 "response.content_part.done", "response.output_item.done",
                                 "response.output_item.added", "response.content_part.added",
                                 "response.output_text.delta", "response.output_text.delta",
                                 "response.output_text.done", "response.content_part.done",
                                 "response.output_item.done", "response.completed"}));
    EXPECT_EQ(events[2], json::parse(R"({"type":"response.output_item.added","sequence_number":2,"output_index":0,
        "item":{"id":"rs_abc_0","type":"reasoning","summary":[],"content":[]}})"));
    EXPECT_EQ(events[5], json::parse(R"({"type":"response.reasoning_text.delta","sequence_number":5,"item_id":"rs_abc_0",
        "output_index":0,"content_index":0,"delta":"m"})"));
    EXPECT_EQ(events[6], json::parse(R"({"type":"response.reasoning_text.done","sequence_number":6,"item_id":"rs_abc_0",
        "output_index":0,"content_index":0,"text":"hmm"})"));
    EXPECT_EQ(events[9], json::parse(R"({"type":"response.output_item.added","sequence_number":9,"output_index":1,
        "item":{"id":"msg_abc_1","type":"message","status":"in_progress","role":"assistant","content":[]}})"));
    EXPECT_EQ(events[10], json::parse(R"({"type":"response.content_part.added","sequence_number":10,"item_id":"msg_abc_1",
        "output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}})"));
    EXPECT_EQ(events[12], json::parse(R"({"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_abc_1",
        "output_index":1,"content_index":0,"delta":"!","logprobs":[]})"));
    EXPECT_EQ(events[13], json::parse(R"({"type":"response.output_text.done","sequence_number":13,"item_id":"msg_abc_1",
        "output_index":1,"content_index":0,"text":"Hi!","logprobs":[]})"));
    EXPECT_EQ(events[15], json::parse(R"({"type":"response.output_item.done","sequence_number":15,"output_index":1,
        "item":{"id":"msg_abc_1","type":"message","status":"completed","role":"assistant",
                "content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi!"}]}})"));
    const json expected_response = json::parse(R"({"id":"resp_abc","object":"response","created_at":1700000000,
        "status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,
        "max_output_tokens":null,"model":"m",
        "output":[{"id":"rs_abc_0","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}]},
                  {"id":"msg_abc_1","type":"message","status":"completed","role":"assistant",
                   "content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi!"}]}],
        "parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,
        "temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,
        "truncation":"disabled",
        "usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":2},"output_tokens":5,"total_tokens":12},
        "user":null,"metadata":{}})");
    EXPECT_EQ(s.response(), expected_response);
    EXPECT_EQ(events.back(), (json{{"type", "response.completed"}, {"sequence_number", 16}, {"response", expected_response}}));
    // The opening snapshot is the same object, in progress and empty.
    json created = expected_response;
    created["status"] = "in_progress";
    created["output"] = json::array();
    created["usage"] = nullptr;
    EXPECT_EQ(events[0], (json{{"type", "response.created"}, {"sequence_number", 0}, {"response", created}}));
}

TEST(ResponsesEvents, ASummaryRequestPutsTheThinkingInSummaryParts) {
    ResponsesContext c = context();
    c.reasoning_summary = "auto";
    ResponsesStream s(c);
    const auto events = run(s, {chunk({{"reasoning_content", "a"}}), chunk({{"reasoning_content", "b"}}, "stop")});
    EXPECT_EQ(types(events), (std::vector<std::string>{
                                 "response.created", "response.in_progress", "response.output_item.added",
                                 "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
                                 "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
                                 "response.reasoning_summary_part.done", "response.output_item.done",
                                 "response.completed"}));
    EXPECT_EQ(events[3], json::parse(R"({"type":"response.reasoning_summary_part.added","sequence_number":3,
        "item_id":"rs_abc_0","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}})"));
    EXPECT_EQ(events[8]["item"], json::parse(R"({"id":"rs_abc_0","type":"reasoning",
        "summary":[{"type":"summary_text","text":"ab"}]})"));
    EXPECT_EQ(s.response()["reasoning"], json::parse(R"({"effort":null,"summary":"auto"})"));
}

TEST(ResponsesEvents, WholeAndPiecewiseToolCallsGiveTheSameItems) {
    // Today's parser: each call whole in one delta. A streaming parser: id and name first, then
    // argument pieces under the same index. Both must give the same items and argument text.
    const std::vector<json> whole = {
        chunk({{"content", "ok"}}),
        chunk({{"tool_calls", json::parse(R"([{"index":0,"id":"call_1","type":"function",
                                                "function":{"name":"f","arguments":"{\"a\":1}"}}])")}}),
        chunk({{"tool_calls", json::parse(R"([{"index":1,"id":"call_2","type":"function",
                                                "function":{"name":"g","arguments":"{}"}}])")}}, "tool_calls")};
    const std::vector<json> pieces = {
        chunk({{"content", "ok"}}),
        chunk({{"tool_calls", json::parse(R"([{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}])")}}),
        chunk({{"tool_calls", json::parse(R"([{"index":0,"function":{"arguments":"{\"a\""}}])")}}),
        chunk({{"tool_calls", json::parse(R"([{"index":0,"function":{"arguments":":1}"}}])")}}),
        chunk({{"tool_calls", json::parse(R"([{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}])")}}),
        chunk(json::object(), "tool_calls")};
    ResponsesStream a(context()), b(context());
    const auto ea = run(a, whole), eb = run(b, pieces);
    EXPECT_EQ(a.output(), b.output());
    EXPECT_EQ(a.output(), json::parse(R"([
        {"id":"msg_abc_0","type":"message","status":"completed","role":"assistant",
         "content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"ok"}]},
        {"id":"fc_abc_1","type":"function_call","status":"completed","call_id":"call_1","name":"f","arguments":"{\"a\":1}"},
        {"id":"fc_abc_2","type":"function_call","status":"completed","call_id":"call_2","name":"g","arguments":"{}"}])"));
    std::vector<std::string> deltas;
    for (const json& e : eb)
        if (e["type"] == "response.function_call_arguments.delta") deltas.push_back(e["delta"]);
    EXPECT_EQ(deltas, (std::vector<std::string>{"{\"a\"", ":1}", "{}"}));
    const auto tb = types(eb);
    const std::vector<std::string> call_events(tb.begin() + 8, tb.end());
    EXPECT_EQ(call_events, (std::vector<std::string>{
                               "response.output_item.added", "response.function_call_arguments.delta",
                               "response.function_call_arguments.delta", "response.function_call_arguments.done",
                               "response.output_item.done", "response.output_item.added",
                               "response.function_call_arguments.delta", "response.function_call_arguments.done",
                               "response.output_item.done", "response.completed"}));
    EXPECT_EQ(eb[8], json::parse(R"({"type":"response.output_item.added","sequence_number":8,"output_index":1,
        "item":{"id":"fc_abc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"f","arguments":""}})"));
    EXPECT_EQ(eb[11], json::parse(R"({"type":"response.function_call_arguments.done","sequence_number":11,
        "item_id":"fc_abc_1","output_index":1,"name":"f","arguments":"{\"a\":1}"})"));
}

TEST(ResponsesEvents, ALengthCutIsIncompleteAndAnErrorFails) {
    ResponsesStream cut(context());
    const auto ec = run(cut, {chunk({{"content", "abc"}}, "length")});
    EXPECT_EQ(ec.back()["type"], "response.incomplete");
    EXPECT_EQ(cut.status(), "incomplete");
    EXPECT_EQ(cut.response()["incomplete_details"], json::parse(R"({"reason":"max_output_tokens"})"));
    EXPECT_EQ(cut.output()[0]["status"], "incomplete");
    EXPECT_EQ(ec.back()["response"], cut.response());

    ResponsesStream failed(context());
    const auto ef = run(failed, {chunk({{"content", "abc"}}, "error")}, "the engine failed");
    EXPECT_EQ(ef.back()["type"], "response.failed");
    EXPECT_EQ(failed.response()["error"], json::parse(R"({"code":"server_error","message":"the engine failed"})"));
    EXPECT_EQ(failed.response()["status"], "failed");
    EXPECT_TRUE(failed.feed(chunk({{"content", "late"}})).empty());  // closed: nothing more
}

TEST(ResponsesEvents, AnEmptyOutputCompletesWithNoItems) {
    ResponsesStream s(context());
    const auto events = run(s, {chunk({{"role", "assistant"}, {"content", ""}}), chunk(json::object(), "stop")});
    EXPECT_EQ(types(events), (std::vector<std::string>{"response.created", "response.in_progress", "response.completed"}));
    EXPECT_EQ(s.output(), json::array());
}

TEST(ResponsesEvents, EachEventIsANamedSseEvent) {
    const json e = {{"type", "response.output_text.delta"}, {"sequence_number", 3}, {"delta", "a\nb"}};
    EXPECT_EQ(responses_sse(e),
              "event: response.output_text.delta\ndata: {\"delta\":\"a\\nb\",\"sequence_number\":3,\"type\":"
              "\"response.output_text.delta\"}\n\n");
}
