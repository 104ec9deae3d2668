// One HTTP/1.1 connection: requests one at a time with keep-alive (pipelined bytes are kept for
// the next request), each routed to the gateway: /health, /metrics, /v1/models, the completion
// endpoints (JSON, or chunked SSE with heartbeat comments when streaming) and the upgrade to
// /v1/ws, which hands the socket to a WebSocket session. While the engine works the socket is
// watched, so a client that hangs up gets its generation cancelled. Every answer, error or not,
// carries X-Request-Id and is logged with its status and duration, plus the CORS headers its
// Origin earns (cors.h); a preflight OPTIONS is answered there. With a TLS context in ServerShared
// the connection speaks HTTPS (the same session code over the TLS stream). The paths are in the
// route table (http_routes.h), credentials and header checks in http_auth.h, and an engine job's
// answer with the socket watch in http_session_job.cpp.
#pragma once
#include "server/http_common.h"

namespace pagoda::server::transport {

// Serves `socket` (already on its own strand; TLS first when shared.tls is set) until the client or
// the server closes it.
void start_http_session(tcp::socket socket, ServerShared& shared);

}  // namespace pagoda::server::transport
