// The network side of `pagoda serve`: a Boost.Beast HTTP/1.1 server (keep-alive, asynchronous I/O
// on a small io_context thread pool, one strand per connection) with SSE streaming and a WebSocket
// endpoint, in front of a ModelRouter (one Gateway per model). I/O threads parse, validate and
// write; the engine thread runs the model and hands deltas back by posting them to the
// connection's strand.
//
// run() listens, starts loading the model on a background thread (so /health answers 503 while it
// loads; with several models nothing loads at start: each loads on its first request, and SIGHUP
// reloads them), and serves until SIGINT/SIGTERM. Then, for drain_grace seconds, it is a lame duck:
// /readyz answers 503 draining at once, so health-checking balancers stop sending, but new requests
// are still served (those the balancers send before their check notices), without keep-alive. A
// second signal ends the grace early. Then it drains: new requests get 503 shutting_down with
// Retry-After and Connection: close, requests in flight finish for up to shutdown_timeout seconds,
// the rest end with a 503 shutting_down error (streams get it as their last event), it stops
// listening and returns 0 (1 if the model failed to load: that drain has no grace).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/model_router.h"

namespace pagoda::server {

struct HttpServerOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8080;             // 0: any free port (printed on stderr: "listening on HOST:PORT")
    int io_threads = 2;
    uint64_t max_body_bytes = 8u << 20;
    double request_timeout = 30;      // seconds to receive a whole request (headers and body)
    double idle_timeout = 60;         // keep-alive wait for the next request
    double heartbeat_seconds = 2;     // SSE ": ping" after this long without output
    double drain_grace = 5;           // seconds after SIGTERM of not-ready but still admitting
    double shutdown_timeout = 10;     // seconds requests in flight get to finish after the grace
    int64_t max_ws_requests = 64;     // requests in flight per WebSocket
    // CORS: origins whose pages may call the API ("*": any); empty: no CORS headers, OPTIONS is a 405.
    std::vector<std::string> cors_origins;
    // HTTPS/WSS: PEM certificate (chain) and private key files; both empty: plain HTTP.
    std::string ssl_cert, ssl_key;
};

// Serves until a signal; returns the process exit status.
int run_http_server(ModelRouter& router, const HttpServerOptions& options);

}  // namespace pagoda::server
