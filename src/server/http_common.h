// Internal to src/server: what the listener, the HTTP session and the WebSocket session share —
// Asio/Beast aliases, the state every connection reads (the gateway and the server options), and
// the helpers that format raw HTTP/1.1 bytes. Responses are written as bytes rather than through
// Beast's serializer so a stream can go out chunk by chunk as the engine produces it.
#pragma once
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/cors.h"
#include "server/model_router.h"
#include "server/http_server.h"

namespace pagoda::server::transport {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;
// The two transports a session runs over: plain TCP, or TLS on TCP (serve --ssl-cert).
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A connection the shutdown must end politely (a WebSocket: with a Close frame).
struct GoingAway {
    virtual ~GoingAway() = default;
    virtual void going_away() = 0;  // any thread; the connection closes on its own strand
};

// Weak references to open connections, for the shutdown to reach them. Dead entries are pruned
// as it grows, so a long-lived server holds one entry per open connection, not per one ever seen.
class ConnectionList {
public:
    void add(std::weak_ptr<GoingAway> connection) {
        std::lock_guard lock(mutex_);
        if (list_.size() >= 2 * live_after_prune_ + 64) {
            std::erase_if(list_, [](const auto& w) { return w.expired(); });
            live_after_prune_ = list_.size();
        }
        list_.push_back(std::move(connection));
    }
    // Calls going_away() on every live connection (outside the lock) and forgets them all.
    void tell_all() {
        std::vector<std::shared_ptr<GoingAway>> open;
        {
            std::lock_guard lock(mutex_);
            for (auto& w : list_)
                if (auto s = w.lock()) open.push_back(std::move(s));
            list_.clear();
            live_after_prune_ = 0;
        }
        for (auto& s : open) s->going_away();
    }

private:
    std::mutex mutex_;
    std::vector<std::weak_ptr<GoingAway>> list_;
    size_t live_after_prune_ = 0;
};

// State shared by the listener and every connection; lives as long as run_http_server().
struct ServerShared {
    ModelRouter& router;
    HttpServerOptions options;
    std::atomic<int64_t> writes_in_progress{0};  // connections with bytes on their way out
    // Connections with a request on its way in: bytes of it received but no answer started, or a
    // new connection that has not sent its first request yet (it is about to).
    std::atomic<int64_t> reads_in_progress{0};
    std::atomic<int64_t> open_websockets{0};     // accepted and not yet destroyed
    std::atomic<bool> draining{false};           // set once by the shutdown, never cleared
    ConnectionList websockets;
    ConnectionList http_connections;
    CorsPolicy cors;                        // from options.cors_origins
    std::shared_ptr<ssl::context> tls;      // set: every connection speaks TLS

    // Tells every open WebSocket to send Close (1001 going away) and close.
    void close_websockets() { websockets.tell_all(); }
    // The drain began: every HTTP connection stops keep-alive (its next answer says
    // Connection: close, then it closes), and one connected but silent gets a few seconds to send.
    void begin_drain() {
        draining = true;
        http_connections.tell_all();
    }
};

// A connection's "writing" (or "reading a request") state, counted in ServerShared's
// writes_in_progress (reads_in_progress): the shutdown waits for both counts to reach zero before
// it stops the I/O threads, so a response's last bytes (a stream's final error event, say) are
// never cut off and a request half received is answered. Clears itself when the connection goes.
class CountedFlag {
public:
    explicit CountedFlag(std::atomic<int64_t>& count) : count_(count) {}
    CountedFlag(const CountedFlag&) = delete;
    CountedFlag& operator=(const CountedFlag&) = delete;
    ~CountedFlag() { set(false); }
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

using Header = CorsHeader;  // a response header: name, value

// Seconds (negative: 0) as a timer duration.
std::chrono::milliseconds millis(double seconds);
// A client's x-request-id is echoed when it is short and plain; anything else is replaced.
bool valid_request_id(std::string_view id);
// Whether a raw header block (request line and header lines, CRLF-separated) folds a header onto
// a continuation line starting with a space or tab (obsolete line folding).
bool has_obs_fold(std::string_view header_block);
// A URL path segment with its %XX escapes decoded (invalid escapes stay as they are).
std::string percent_decode(std::string_view segment);
// The status line and headers of a response (`headers`, then `more`), ending with the blank line.
std::string format_head(int status, const std::vector<Header>& headers, const std::vector<Header>& more = {});
// One chunk of a `Transfer-Encoding: chunked` body.
std::string http_chunk(std::string_view data);

}  // namespace pagoda::server::transport
