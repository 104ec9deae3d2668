// Decoding one client message of the /v1/ws protocol (docs/api.md), without a socket or a gateway,
// in the two steps the session needs around its own in-flight checks:
//   decode_ws_envelope(): the bytes must be a JSON text object; `id` (string or integer) and `type`
//     ("request", "cancel" or absent) are checked;
//   ws_request_target(): for a request, `endpoint` ("completions" | "chat.completions") and `body`
//     (an object, handed to the gateway as an HTTP body would be).
// Every problem is an ApiError (400) naming the field; the id is filled in as soon as it is known so
// the error sent back can carry it.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace pagoda::server {

struct WsMessage {
    nlohmann::json id = nullptr;  // the client's id, echoed on every reply (null until known)
    std::string key;              // id.dump(): the session's in-flight table key
    bool cancel = false;          // type "cancel"; else a request
    nlohmann::ordered_json object;  // the whole message, keys in the order sent (schemas keep their order)
};

// Throws ApiError; `out.id` is set before any check that follows it.
void decode_ws_envelope(std::string_view message, bool text, WsMessage& out);

struct WsRequestTarget {
    Endpoint endpoint;
    const nlohmann::ordered_json* body;  // points into the message's object
};

// Throws ApiError.
WsRequestTarget ws_request_target(const WsMessage& message);

}  // namespace pagoda::server
