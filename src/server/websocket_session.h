// The WebSocket endpoint (GET /v1/ws): one connection carries many requests at once. A message
// {"id", "endpoint": "completions" | "chat.completions" | "infill", "body"} starts one, answered by
// {"id", "chunk"} messages and then {"id", "done": true, "usage"} or {"id", "error"};
// {"id", "type": "cancel"} cancels it. Closing the socket cancels everything it started. Protocol
// errors are {"id", "error"} messages, never a closed connection. Over TLS the same session runs
// on the TLS stream (WSS).
#pragma once
#include <boost/beast/websocket.hpp>
#include <string>

#include "server/http_common.h"

namespace pagoda::server::transport {

// Completes the upgrade `request` on `stream` (an authenticated GET /v1/ws; `key` may be null on
// an open server) and serves the connection until it closes. `conn_id` prefixes its log lines.
// One overload per transport (plain or TLS), both the same session code.
void start_websocket_session(PlainStream stream, ServerShared& shared, const ApiKey* key, std::string conn_id,
                             http::request<http::string_body> request);
void start_websocket_session(TlsStream stream, ServerShared& shared, const ApiKey* key, std::string conn_id,
                             http::request<http::string_body> request);

}  // namespace pagoda::server::transport
