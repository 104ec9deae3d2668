// /v1/ws message decoding: the envelope (JSON text object, id, type) and a request's endpoint and
// body; every refusal names its field and carries the id once it is known.
#include "server/ws_message.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

using namespace pagoda::server;
using json = nlohmann::json;

namespace {

ApiError envelope_error(std::string_view text, bool is_text, WsMessage& m) {
    try {
        decode_ws_envelope(text, is_text, m);
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "not refused: " << text;
    return ApiError::internal("not refused");
}

ApiError target_error(const WsMessage& m) {
    try {
        ws_request_target(m);
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "not refused: " << m.object.dump();
    return ApiError::internal("not refused");
}

}  // namespace

TEST(WsMessage, DecodesARequest) {
    WsMessage m;
    decode_ws_envelope(R"({"id": 7, "endpoint": "chat.completions", "body": {"messages": []}})", true, m);
    EXPECT_EQ(m.id, json(7));
    EXPECT_EQ(m.key, "7");
    EXPECT_FALSE(m.cancel);
    const WsRequestTarget t = ws_request_target(m);
    EXPECT_EQ(t.endpoint, Endpoint::chat_completions);
    EXPECT_EQ(json(*t.body), json::parse(R"({"messages": []})"));
    // The body keeps its keys in the order sent, so a schema in it keeps its properties' order.
    decode_ws_envelope(R"({"id": 8, "endpoint": "completions", "body": {"zeta": 1, "alpha": 2}})", true, m);
    EXPECT_EQ(ws_request_target(m).body->dump(), R"({"zeta":1,"alpha":2})");

    decode_ws_envelope(R"({"id": "a", "type": "request", "endpoint": "completions", "body": {}})", true, m);
    EXPECT_EQ(m.key, "\"a\"");  // string and integer ids never collide
    EXPECT_EQ(ws_request_target(m).endpoint, Endpoint::completions);
}

TEST(WsMessage, DecodesACancel) {
    WsMessage m;
    decode_ws_envelope(R"({"type": "cancel", "id": "long"})", true, m);
    EXPECT_TRUE(m.cancel);
    EXPECT_EQ(m.key, "\"long\"");
}

TEST(WsMessage, RefusesBadEnvelopes) {
    WsMessage m;
    EXPECT_EQ(envelope_error("{}", false, m).status, 400);
    EXPECT_EQ(envelope_error("{", true, m).status, 400);
    EXPECT_EQ(std::string(envelope_error("[1]", true, m).what()), "a message must be a JSON object");
    ApiError e = envelope_error(R"({"id": 1.5})", true, m);
    EXPECT_EQ(e.param, "id");
    EXPECT_EQ(m.id, json(1.5));  // echoed back as sent
    EXPECT_EQ(envelope_error(R"({"endpoint": "completions"})", true, m).param, "id");
    e = envelope_error(R"({"id": 3, "type": "stop"})", true, m);
    EXPECT_EQ(e.param, "type");
    EXPECT_EQ(m.id, json(3));  // the error carries the id
}

TEST(WsMessage, RefusesBadTargets) {
    WsMessage m;
    decode_ws_envelope(R"({"id": 1})", true, m);
    EXPECT_EQ(target_error(m).param, "endpoint");
    decode_ws_envelope(R"({"id": 1, "endpoint": "embeddings", "body": {}})", true, m);
    EXPECT_EQ(target_error(m).param, "endpoint");
    decode_ws_envelope(R"({"id": 1, "endpoint": "completions", "body": "x"})", true, m);
    EXPECT_EQ(target_error(m).param, "body");
    decode_ws_envelope(R"({"id": 1, "endpoint": "completions"})", true, m);
    EXPECT_EQ(target_error(m).param, "body");
}
