#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cmath>
#include <deque>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/sse.h"

namespace pagoda::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds millis(double seconds) {
    return std::chrono::milliseconds(int64_t(std::max(0.0, seconds) * 1000.0));
}

// A client's x-request-id is echoed when it is short and plain; anything else is replaced.
bool valid_request_id(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}

struct Header {
    std::string name, value;
};

std::string format_head(int status, const std::vector<Header>& headers) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status,
                                  std::string_view(http::obsolete_reason(http::int_to_status(unsigned(status)))));
    for (const auto& h : headers) out += h.name + ": " + h.value + "\r\n";
    out += "\r\n";
    return out;
}

std::string http_chunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

// State shared by the listener and every connection.
struct ServerShared {
    Gateway& gateway;
    HttpServerOptions options;
};

// ---------------------------------------------------------------------------------------------
// WebSocket connection: several requests in flight, each answered by chunk messages then done.

class WsSession : public std::enable_shared_from_this<WsSession> {
public:
    WsSession(tcp::socket socket, ServerShared& shared, const ApiKey* key, std::string conn_id)
        : ws_(std::move(socket)), shared_(shared), key_(key), conn_id_(std::move(conn_id)) {}

    void run(http::request<http::string_body> req) {
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.set_option(websocket::stream_base::decorator(
            [](websocket::response_type& res) { res.set(http::field::server, "pagoda"); }));
        ws_.read_message_max(shared_.options.max_body_bytes);
        ws_.async_accept(req, beast::bind_front_handler(&WsSession::on_accept, shared_from_this()));
    }

private:
    struct Entry {
        std::shared_ptr<Job> job;
        json client_id;
        uint64_t serial = 0;
    };

    void on_accept(beast::error_code ec) {
        if (ec) return;
        log_info("{} websocket open", conn_id_);
        do_read();
    }

    void do_read() { ws_.async_read(buffer_, beast::bind_front_handler(&WsSession::on_read, shared_from_this())); }

    void on_read(beast::error_code ec, size_t) {
        if (ec) {
            closed_ = true;
            // Closing the socket cancels everything it started.
            for (auto& [k, e] : jobs_) {
                e.job->cancel();
                e.job->finish(499);
            }
            if (!jobs_.empty()) log_info("{} websocket closed: cancelled {} requests", conn_id_, jobs_.size());
            jobs_.clear();
            return;
        }
        std::string message = beast::buffers_to_string(buffer_.data());
        buffer_.consume(buffer_.size());
        handle(message, ws_.got_text());
        do_read();
    }

    void send_error(const json& id, const ApiError& e) {
        json out = {{"id", id}, {"error", e.error_object()}};
        out["error"]["status"] = e.status;
        if (e.retry_after && std::isfinite(*e.retry_after)) out["error"]["retry_after"] = std::ceil(*e.retry_after);
        send(out);
    }

    void handle(const std::string& message, bool text) {
        json id = nullptr;
        try {
            if (!text) throw ApiError::invalid("binary messages are not supported; send JSON text");
            json msg = parse_json_body(message);
            if (!msg.is_object()) throw ApiError::invalid("a message must be a JSON object");
            if (msg.contains("id")) id = msg["id"];
            if (!id.is_string() && !id.is_number_integer())
                throw ApiError::invalid("'id' must be a string or an integer", "id");
            const std::string key = id.dump();
            if (msg.contains("type") && msg["type"] != "request") {
                if (msg["type"] != "cancel")
                    throw ApiError::invalid("'type' must be \"cancel\" or absent", "type");
                auto it = jobs_.find(key);
                if (it == jobs_.end())
                    throw ApiError(404, "no request with this id is in flight", "invalid_request_error", "id", "not_found");
                it->second.job->cancel();  // its last deltas (finish_reason "abort") and done follow
                return;
            }
            if (jobs_.count(key)) throw ApiError::invalid("a request with this id is already in flight", "id", "duplicate_id");
            if (int64_t(jobs_.size()) >= shared_.options.max_ws_requests)
                throw ApiError(429, fmt::format("at most {} requests may be in flight on one WebSocket", shared_.options.max_ws_requests),
                               "rate_limit_error", {}, "too_many_requests");
            auto ep = msg.find("endpoint");
            if (ep == msg.end() || !ep->is_string()) throw ApiError::invalid("'endpoint' must be a string", "endpoint");
            Endpoint endpoint;
            if (*ep == "completions") endpoint = Endpoint::completions;
            else if (*ep == "chat.completions") endpoint = Endpoint::chat_completions;
            else throw ApiError::invalid("'endpoint' must be \"completions\" or \"chat.completions\"", "endpoint");
            auto body = msg.find("body");
            if (body == msg.end() || !body->is_object()) throw ApiError::invalid("'body' must be a JSON object", "body");

            const uint64_t serial = ++serial_;
            auto self = shared_from_this();  // alive until the engine's last delta
            auto executor = ws_.get_executor();
            auto sink = [self, executor, key, serial](size_t sub, const engine::Delta& d) {
                net::post(executor, [self, key, serial, sub, d] { self->on_delta(key, serial, sub, d); });
            };
            const std::string request_id = shared_.gateway.new_request_id();
            auto job = shared_.gateway.start(endpoint, *body, key_, request_id, sink);
            jobs_[key] = Entry{job, id, serial};
            for (auto& chunk : job->opening_chunks()) send(json{{"id", id}, {"chunk", std::move(chunk)}});
        } catch (const ApiError& e) {
            send_error(id, e);
        } catch (const std::exception& e) {
            send_error(id, ApiError::internal(e.what()));
        }
    }

    void on_delta(const std::string& key, uint64_t serial, size_t sub, const engine::Delta& d) {
        auto it = jobs_.find(key);
        if (it == jobs_.end() || it->second.serial != serial || closed_) return;
        Entry& e = it->second;
        for (auto& chunk : e.job->add(sub, d)) send(json{{"id", e.client_id}, {"chunk", std::move(chunk)}});
        if (!e.job->done()) return;
        const auto& assembler = e.job->assembler();
        if (assembler.error()) {
            send_error(e.client_id, ApiError::internal(*assembler.error()));
            e.job->finish(500);
        } else {
            send(json{{"id", e.client_id}, {"done", true}, {"usage", assembler.usage()}});
            e.job->finish(200);
        }
        jobs_.erase(it);
    }

    void send(const json& message) {
        if (closed_) return;
        outbox_.push_back(dump_json(message));
        if (!writing_) write_next();
    }

    void write_next() {
        if (outbox_.empty() || closed_) {
            writing_ = false;
            return;
        }
        writing_ = true;
        ws_.text(true);
        ws_.async_write(net::buffer(outbox_.front()), beast::bind_front_handler(&WsSession::on_write, shared_from_this()));
    }

    void on_write(beast::error_code ec, size_t) {
        outbox_.pop_front();
        if (ec) {
            closed_ = true;  // the read side sees the failure too and cancels the requests
            writing_ = false;
            return;
        }
        write_next();
    }

    websocket::stream<beast::tcp_stream> ws_;
    beast::flat_buffer buffer_;
    ServerShared& shared_;
    const ApiKey* key_;
    std::string conn_id_;
    std::map<std::string, Entry> jobs_;
    std::deque<std::string> outbox_;
    bool writing_ = false, closed_ = false;
    uint64_t serial_ = 0;
};

// ---------------------------------------------------------------------------------------------
// HTTP connection: one request at a time (keep-alive), streaming answers as chunked SSE.

class HttpSession : public std::enable_shared_from_this<HttpSession> {
public:
    HttpSession(tcp::socket socket, ServerShared& shared)
        : stream_(std::move(socket)), shared_(shared), heartbeat_(stream_.get_executor()), idle_(stream_.get_executor()) {}

    void start() {
        net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::do_read, shared_from_this()));
    }

private:
    Gateway& gw() { return shared_.gateway; }
    const HttpServerOptions& opt() const { return shared_.options; }

    void do_read() {
        parser_.emplace();
        parser_->body_limit(opt().max_body_bytes);
        parser_->header_limit(64 * 1024);
        stream_.expires_after(millis(opt().request_timeout));
        http::async_read_header(stream_, buffer_, *parser_,
                                beast::bind_front_handler(&HttpSession::on_header, shared_from_this()));
    }

    void on_header(beast::error_code ec, size_t) {
        if (ec) return on_read(ec, 0);
        auto& req = parser_->get();
        if (beast::iequals(req[http::field::expect], "100-continue")) {
            // curl and others wait for this before sending a body.
            continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
            net::async_write(stream_, net::buffer(*continue_), [self = shared_from_this()](beast::error_code ec, size_t) {
                if (ec) return self->close();
                http::async_read(self->stream_, self->buffer_, *self->parser_,
                                 beast::bind_front_handler(&HttpSession::on_read, self));
            });
            return;
        }
        http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
    }

    void on_read(beast::error_code ec, size_t) {
        if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) return close();
        started_ = Clock::now();
        request_id_ = gw().new_request_id();
        method_ = "-";
        path_ = "-";
        key_name_ = "-";
        if (ec == beast::error::timeout) {
            if (buffer_.size() > 0 || parser_->got_some())
                log_info("{} connection timed out while sending its request", request_id_);
            return close();
        }
        if (ec == http::error::body_limit || ec == http::error::header_limit) {
            keep_alive_ = false;
            if (parser_->is_header_done()) {
                method_ = std::string(parser_->get().method_string());
                path_ = std::string(parser_->get().target().substr(0, parser_->get().target().find('?')));
            }
            return send_error(ec == http::error::body_limit
                                  ? ApiError::too_large(fmt::format("the request body exceeds {} bytes", opt().max_body_bytes))
                                  : ApiError(431, "the request headers are too large", "invalid_request_error", {},
                                             "headers_too_large"));
        }
        if (ec) {
            if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
                keep_alive_ = false;
                return send_error(ApiError::invalid(fmt::format("malformed HTTP request: {}", ec.message())));
            }
            return close();
        }
        handle(parser_->release());
    }

    void handle(http::request<http::string_body> req) {
        keep_alive_ = req.keep_alive();
        method_ = std::string(req.method_string());
        std::string_view target = req.target();
        path_ = std::string(target.substr(0, target.find('?')));
        if (auto rid = req["x-request-id"]; valid_request_id(rid)) request_id_ = std::string(rid);
        const std::string auth(req[http::field::authorization]);
        try {
            route(req, auth);
        } catch (const ApiError& e) {
            send_error(e);
        } catch (const std::exception& e) {
            log_error("{} {} {}: internal error: {}", request_id_, method_, path_, e.what());
            send_error(ApiError::internal(e.what()));
        }
    }

    void require_method(const http::request<http::string_body>& req, http::verb verb, const char* allowed) {
        if (req.method() == verb) return;
        allow_ = allowed;
        throw ApiError::method_not_allowed(fmt::format("{} {} is not allowed; use {}", method_, path_, allowed));
    }

    void route(http::request<http::string_body>& req, const std::string& auth) {
        if (path_ == "/health") {
            require_method(req, http::verb::get, "GET");
            if (!opt_open_health()) authenticate(auth);
            return send_simple(gw().health());
        }
        if (path_ == "/metrics") {
            require_method(req, http::verb::get, "GET");
            if (!opt_open_metrics()) authenticate(auth);
            return send_simple(gw().metrics());
        }
        if (path_ == "/v1/models") {
            require_method(req, http::verb::get, "GET");
            authenticate(auth);
            return send_simple(gw().models());
        }
        if (path_ == "/v1/ws") {
            require_method(req, http::verb::get, "GET");
            if (!websocket::is_upgrade(req))
                throw ApiError(426, "GET /v1/ws needs a WebSocket upgrade", "invalid_request_error", {}, "upgrade_required");
            const ApiKey* key = authenticate(auth);
            log_info("{} GET /v1/ws 101 key={}", request_id_, key_name_);
            stream_.expires_never();
            std::make_shared<WsSession>(stream_.release_socket(), shared_, key, request_id_)->run(std::move(req));
            return;
        }
        Endpoint endpoint;
        if (path_ == "/v1/completions") endpoint = Endpoint::completions;
        else if (path_ == "/v1/chat/completions") endpoint = Endpoint::chat_completions;
        else throw ApiError::not_found(fmt::format("no route for {} {}", method_, path_));
        require_method(req, http::verb::post, "POST");
        const ApiKey* key = authenticate(auth);
        json body;
        try {
            body = parse_json_body(req.body());
        } catch (const ApiError&) {
            gw().record_rejection(key, "invalid");
            throw;
        }
        start_completion(endpoint, body, key);
    }

    bool opt_open_health() { return gw().open_health(); }
    bool opt_open_metrics() { return gw().open_metrics(); }

    const ApiKey* authenticate(const std::string& auth) {
        const ApiKey* key = gw().authenticate(auth);
        key_name_ = key ? key->name : "anonymous";
        return key;
    }

    // ---- completions ----

    void start_completion(Endpoint endpoint, const json& body, const ApiKey* key) {
        // A generation may run far longer than the request timeout. This must happen before any
        // write starts: Beast applies a new expiry only to operations not yet pending, and later
        // writes would inherit the old deadline.
        stream_.expires_never();
        // The sink keeps the connection alive until the engine's last delta (it always comes:
        // finished, cancelled or failed), so a request is never dropped unanswered.
        auto self = shared_from_this();
        auto executor = stream_.get_executor();
        auto sink = [self, executor](size_t sub, const engine::Delta& d) {
            net::post(executor, [self, sub, d] { self->on_delta(sub, d); });
        };
        job_ = gw().start(endpoint, body, key, request_id_, sink);
        client_gone_ = false;
        response_done_ = false;
        if (job_->stream()) {
            streaming_ = true;
            enqueue(format_head(200, {{"Content-Type", "text/event-stream; charset=utf-8"},
                                      {"Cache-Control", "no-cache"},
                                      {"Transfer-Encoding", "chunked"},
                                      {"X-Request-Id", request_id_},
                                      {"Connection", keep_alive_ ? "keep-alive" : "close"}}));
            for (const auto& chunk : job_->opening_chunks()) enqueue(http_chunk(sse_data(dump_json(chunk))));
            arm_heartbeat();
        }
        // Watch the socket while the engine works: EOF or a reset means the client left. With
        // pipelined bytes already buffered, the next request would be mistaken for that, so skip.
        if (buffer_.size() == 0) start_watch();
    }

    void on_delta(size_t sub, const engine::Delta& d) {
        if (!job_ || response_done_) return;
        auto chunks = job_->add(sub, d);
        if (client_gone_) {
            if (job_->done()) {
                finish_job(499);
                close();
            }
            return;
        }
        if (streaming_)
            for (const auto& chunk : chunks) enqueue(http_chunk(sse_data(dump_json(chunk))));
        if (!job_->done()) return;
        const auto& a = job_->assembler();
        if (streaming_) {
            if (a.error()) {
                ApiError e = ApiError::internal(*a.error());
                enqueue(http_chunk(sse_data(dump_json(e.body()))));
            } else if (a.context().include_usage) {
                enqueue(http_chunk(sse_data(dump_json(a.usage_chunk()))));
            }
            enqueue(http_chunk(sse_done()));
            enqueue("0\r\n\r\n");
            heartbeat_.cancel();
            finish_job(a.error() ? 500 : 200);
            return;
        }
        if (a.error()) {
            ApiError e = ApiError::internal(*a.error());
            finish_job(500);  // releases the job (and `a`)
            return send_error(e);
        }
        std::string body = dump_json(a.response());
        finish_job(200);
        send_body(200, "application/json", body, {});
    }

    void finish_job(int status) {
        response_done_ = true;
        status_ = status;
        if (job_) job_->finish(status);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
        log_info("{} {} {} {} {:.1f} ms key={}{}", request_id_, method_, path_, status, ms, key_name_,
                 client_gone_ ? " (client disconnected: cancelled)" : "");
        job_.reset();
    }

    void arm_heartbeat() {
        heartbeat_.expires_after(millis(opt().heartbeat_seconds));
        heartbeat_.async_wait([weak = weak_from_this()](beast::error_code ec) {
            auto self = weak.lock();
            if (ec || !self || !self->job_ || self->response_done_ || self->client_gone_) return;
            if (Clock::now() - self->last_write_ >= millis(self->opt().heartbeat_seconds) - std::chrono::milliseconds(50))
                self->enqueue(http_chunk(sse_comment("ping")));
            self->arm_heartbeat();
        });
    }

    void start_watch() {
        watching_ = true;
        stream_.socket().async_read_some(buffer_.prepare(4096), beast::bind_front_handler(&HttpSession::on_watch, shared_from_this()));
    }

    void on_watch(beast::error_code ec, size_t n) {
        watching_ = false;
        if (ec) {
            if (job_ && !response_done_) {  // the client left mid-request: stop generating for it
                client_gone_ = true;
                heartbeat_.cancel();
                job_->cancel();
            }
            idle_.cancel();
            if (!job_) close();
            return;
        }
        buffer_.commit(n);
        if (job_ && !response_done_) {  // pipelined bytes: keep them for the next request
            if (buffer_.size() < 64 * 1024) start_watch();
            return;
        }
        idle_.cancel();
        if (!writing_) do_read();  // else the write completion continues
    }

    // ---- writing ----

    void enqueue(std::string data) {
        outbox_.push_back(std::move(data));
        if (!writing_) write_next();
    }

    void write_next() {
        if (outbox_.empty()) {
            writing_ = false;
            return after_write();
        }
        writing_ = true;
        net::async_write(stream_, net::buffer(outbox_.front()), beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
    }

    void on_write(beast::error_code ec, size_t) {
        outbox_.pop_front();
        last_write_ = Clock::now();
        if (ec) {
            writing_ = false;
            outbox_.clear();
            if (job_ && !response_done_) {
                client_gone_ = true;
                job_->cancel();
            }
            heartbeat_.cancel();
            return close();
        }
        write_next();
    }

    // The outbox drained: if the response is complete, go on to the next request (or close).
    void after_write() {
        if (!response_done_) return;
        if (!keep_alive_) return close_after_send();
        if (job_) return;
        response_done_ = false;
        streaming_ = false;
        if (watching_) {
            // The watch read doubles as the wait for the next request; bound it.
            idle_.expires_after(millis(opt().idle_timeout));
            idle_.async_wait([weak = weak_from_this()](beast::error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->close();
            });
            return;
        }
        do_read();
    }

    void send_simple(const SimpleResponse& r) {
        std::vector<Header> extra;
        if (r.retry_after) extra.push_back({"Retry-After", std::to_string(int64_t(std::ceil(*r.retry_after)))});
        log_request(r.status);
        send_body(r.status, r.content_type, r.body, extra);
    }

    void send_error(const ApiError& e) {
        std::vector<Header> extra;
        if (e.retry_after) {
            const double s = std::isfinite(*e.retry_after) ? std::max(1.0, std::ceil(*e.retry_after)) : 60.0;
            extra.push_back({"Retry-After", std::to_string(int64_t(s))});
        }
        if (e.status == 401) extra.push_back({"WWW-Authenticate", "Bearer"});
        if (e.status == 405 && !allow_.empty()) extra.push_back({"Allow", allow_});
        allow_.clear();
        if (e.status >= 500 || e.status == 413 || e.status == 429 || e.status == 401)
            log_info("{} {} {} {} key={}: {}", request_id_, method_, path_, e.status, key_name_, e.what());
        else
            log_request(e.status);
        if (e.status == 413 || e.status == 431) keep_alive_ = false;
        send_body(e.status, "application/json", dump_json(e.body()), extra);
    }

    void log_request(int status) {
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
        log_info("{} {} {} {} {:.1f} ms key={}", request_id_, method_, path_, status, ms, key_name_);
    }

    void send_body(int status, const std::string& content_type, const std::string& body, std::vector<Header> extra) {
        std::vector<Header> headers = {{"Content-Type", content_type},
                                       {"Content-Length", std::to_string(body.size())},
                                       {"X-Request-Id", request_id_},
                                       {"Server", "pagoda"},
                                       {"Connection", keep_alive_ ? "keep-alive" : "close"}};
        for (auto& h : extra) headers.push_back(std::move(h));
        response_done_ = true;
        enqueue(format_head(status, headers) + body);
    }

    // After the last byte: half-close, then discard what the client still sends (a body we refused)
    // for a moment, so it reads our answer instead of a reset.
    void close_after_send() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        if (watching_) {  // the watch read sees the client's EOF and closes; bound the wait
            idle_.expires_after(std::chrono::seconds(2));
            idle_.async_wait([weak = weak_from_this()](beast::error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->close();
            });
            return;
        }
        drain_ = std::make_shared<std::array<char, 8192>>();
        stream_.expires_after(std::chrono::seconds(2));
        drain();
    }

    void drain() {
        stream_.async_read_some(net::buffer(*drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->close();
            self->drain();
        });
    }

    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.socket().close(ec);
    }

    beast::tcp_stream stream_;
    ServerShared& shared_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<std::string> continue_;
    std::shared_ptr<std::array<char, 8192>> drain_;
    net::steady_timer heartbeat_, idle_;
    std::deque<std::string> outbox_;
    bool writing_ = false, watching_ = false, keep_alive_ = true;
    bool streaming_ = false, response_done_ = false, client_gone_ = false;
    std::shared_ptr<Job> job_;
    int status_ = 0;
    std::string request_id_, method_ = "-", path_ = "-", key_name_ = "-", allow_;
    Clock::time_point started_ = Clock::now(), last_write_ = Clock::now();
};

}  // namespace

namespace {

class Listener : public std::enable_shared_from_this<Listener> {
public:
    Listener(net::io_context& ioc, tcp::acceptor& acceptor, ServerShared& shared)
        : ioc_(ioc), acceptor_(acceptor), shared_(shared) {}
    void accept() {
        acceptor_.async_accept(net::make_strand(ioc_), beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
    }

private:
    void on_accept(beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // shutting down
        if (!ec) {
            socket.set_option(tcp::no_delay(true), ec);  // token streams are many small writes
            std::make_shared<HttpSession>(std::move(socket), shared_)->start();
        } else {
            log_warn("accept failed: {}", ec.message());
        }
        accept();
    }
    net::io_context& ioc_;
    tcp::acceptor& acceptor_;
    ServerShared& shared_;
};

}  // namespace

int run_http_server(Gateway& gateway, const HttpServerOptions& options) {
    ServerShared shared{gateway, options};
    net::io_context ioc(options.io_threads);
    tcp::acceptor acceptor(ioc);
    {
        beast::error_code ec;
        auto address = net::ip::make_address(options.host, ec);
        if (ec) fail("--host '{}' is not an IP address", options.host);
        tcp::endpoint endpoint(address, options.port);
        acceptor.open(endpoint.protocol(), ec);
        if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
        if (!ec) acceptor.bind(endpoint, ec);
        if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
        if (ec) fail("cannot listen on {}:{}: {}", options.host, options.port, ec.message());
    }
    const auto bound = acceptor.local_endpoint();
    log_info("serve: listening on {}:{}", bound.address().to_string(), bound.port());
    std::make_shared<Listener>(ioc, acceptor, shared)->accept();

    int exit_code = 0;
    std::atomic<bool> shutting_down{false};
    net::steady_timer drain_timer(ioc);
    Clock::time_point drain_start;
    bool engine_stopped = false;
    // Polls until the requests in flight are done (or the grace period ran out and they were
    // cancelled), then stops the I/O threads.
    std::function<void()> poll_drain = [&] {
        drain_timer.expires_after(std::chrono::milliseconds(50));
        drain_timer.async_wait([&](beast::error_code) {
            const double waited = std::chrono::duration<double>(Clock::now() - drain_start).count();
            if (gateway.active_jobs() == 0 || waited > options.grace_seconds + 5) {
                ioc.stop();
                return;
            }
            if (!engine_stopped && waited >= options.grace_seconds) {
                log_info("serve: grace period over: cancelling {} requests", gateway.active_jobs());
                engine_stopped = true;
                gateway.stop_engine();  // cancels: the final deltas still reach the clients
            }
            poll_drain();
        });
    };
    auto begin_shutdown = [&](const char* why) {
        if (shutting_down.exchange(true)) return;
        log_info("serve: {}: no new connections; waiting up to {} s for {} requests", why, options.grace_seconds,
                 gateway.active_jobs());
        beast::error_code ec;
        acceptor.close(ec);
        gateway.begin_drain();
        drain_start = Clock::now();
        poll_drain();
    };
    net::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code ec, int sig) {
        if (!ec) begin_shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
    });

    std::thread loader([&] {
        try {
            gateway.load();
        } catch (const std::exception& e) {
            log_error("serve: cannot load the model: {}", e.what());
            net::post(ioc, [&] {
                exit_code = 1;
                begin_shutdown("model load failed");
            });
        }
    });

    std::vector<std::thread> threads;
    for (int i = 1; i < options.io_threads; ++i) threads.emplace_back([&] { ioc.run(); });
    ioc.run();
    for (auto& t : threads) t.join();
    loader.join();
    gateway.stop_engine();
    log_info("serve: stopped");
    return exit_code;
}

}  // namespace pagoda::server
