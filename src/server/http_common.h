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
#include <memory>
#include <mutex>
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

// A connection the shutdown must end politely (a WebSocket: with a Close frame).
struct GoingAway {
    virtual ~GoingAway() = default;
    virtual void going_away() = 0;  // any thread; the connection closes on its own strand
};

// State shared by the listener and every connection; lives as long as run_http_server().
struct ServerShared {
    Gateway& gateway;
    HttpServerOptions options;
    std::atomic<int64_t> writes_in_progress{0};  // connections with bytes on their way out
    std::atomic<int64_t> open_websockets{0};     // accepted and not yet destroyed
    std::mutex websockets_mutex;
    std::vector<std::weak_ptr<GoingAway>> websockets;

    // Tells every open WebSocket to send Close (1001 going away) and close.
    void close_websockets() {
        std::vector<std::shared_ptr<GoingAway>> open;
        {
            std::lock_guard lock(websockets_mutex);
            for (auto& w : websockets)
                if (auto s = w.lock()) open.push_back(std::move(s));
            websockets.clear();
        }
        for (auto& s : open) s->going_away();
    }
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
// Whether a raw header block (request line and header lines, CRLF-separated) folds a header onto
// a continuation line starting with a space or tab (obsolete line folding).
bool has_obs_fold(std::string_view header_block);
// A URL path segment with its %XX escapes decoded (invalid escapes stay as they are).
std::string percent_decode(std::string_view segment);
// The status line and headers of a response, ending with the blank line.
std::string format_head(int status, const std::vector<Header>& headers);
// One chunk of a `Transfer-Encoding: chunked` body.
std::string http_chunk(std::string_view data);

}  // namespace pagoda::server::transport
