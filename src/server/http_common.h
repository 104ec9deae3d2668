// Internal to src/server: what the listener, the HTTP session and the WebSocket session share —
// Asio/Beast aliases, the state every connection reads (the gateway and the server options), and
// the helpers that format raw HTTP/1.1 bytes. Responses are written as bytes rather than through
// Beast's serializer so a stream can go out chunk by chunk as the engine produces it.
#pragma once
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "server/gateway.h"
#include "server/http_server.h"

namespace pagoda::server::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// State shared by the listener and every connection; lives as long as run_http_server().
struct ServerShared {
    Gateway& gateway;
    HttpServerOptions options;
    std::atomic<int64_t> writes_in_progress{0};  // connections with bytes on their way out
};

// A connection's "writing" state, counted in ServerShared::writes_in_progress: the shutdown waits
// for the count to reach zero before it stops the I/O threads, so a response's last bytes (a
// stream's final error event, say) are never cut off. Clears itself when the connection goes.
class WriteFlag {
public:
    explicit WriteFlag(std::atomic<int64_t>& count) : count_(count) {}
    WriteFlag(const WriteFlag&) = delete;
    WriteFlag& operator=(const WriteFlag&) = delete;
    ~WriteFlag() { set(false); }
    void set(bool on) {
        if (on == on_) return;
        count_ += on ? 1 : -1;
        on_ = on;
    }
    explicit operator bool() const { return on_; }

private:
    std::atomic<int64_t>& count_;
    bool on_ = false;
};

struct Header {
    std::string name, value;
};

// Seconds (negative: 0) as a timer duration.
std::chrono::milliseconds millis(double seconds);
// A client's x-request-id is echoed when it is short and plain; anything else is replaced.
bool valid_request_id(std::string_view id);
// The status line and headers of a response, ending with the blank line.
std::string format_head(int status, const std::vector<Header>& headers);
// One chunk of a `Transfer-Encoding: chunked` body.
std::string http_chunk(std::string_view data);

}  // namespace pagoda::server::transport
