#include "server/http_session.h"

#include <array>
#include <cmath>
#include <deque>
#include <fmt/format.h>
#include <optional>

#include "core/log.h"
#include "server/dashboard.h"
#include "server/responses_events.h"
#include "server/sse.h"
#include "server/websocket_session.h"

namespace pagoda::server::transport {
namespace {

namespace websocket = beast::websocket;

// One session's code for both transports: Stream is PlainStream or TlsStream (http_common.h). What
// differs is only the TLS handshake at the start and the TCP layer under the stream (timeouts,
// shutdown), reached through tcp_layer().
template <class Stream>
class HttpSession : public GoingAway, public std::enable_shared_from_this<HttpSession<Stream>> {
public:
    static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

    template <class... StreamArgs>
    explicit HttpSession(ServerShared& shared, StreamArgs&&... stream_args)
        : stream_(std::forward<StreamArgs>(stream_args)...),
          shared_(shared),
          heartbeat_(stream_.get_executor()),
          idle_(stream_.get_executor()),
          writing_(shared.writes_in_progress),
          reading_(shared.reads_in_progress) {}

    void start() {
        // A new connection counts as a request on its way in until it sends one or goes: the
        // client connected to send something, and a drain must not end under it.
        reading_.set(true);
        shared_.http_connections.add(this->weak_from_this());
        net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
            if constexpr (kTls) {
                // The handshake is bounded like a request: a client that connects and stalls goes.
                self->tcp_layer().expires_after(millis(self->opt().request_timeout));
                self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
                    if (ec) {
                        log_debug("TLS handshake failed: {}", ec.message());
                        return self->close();
                    }
                    self->do_read();
                });
            } else {
                self->do_read();
            }
        });
    }

    // The server began to drain: no more keep-alive. A connection idle between requests stays open
    // and its next request is answered with Connection: close — closing it now would race with a
    // request its client's pool may be sending on it this instant (that request would be lost).
    void going_away() override {
        net::post(stream_.get_executor(), [self = this->shared_from_this()] {
            self->keep_alive_ = false;
            if (!self->served_any_ && self->buffer_.size() == 0) {
                // Connected but silent: a few seconds to send, not the whole request timeout.
                self->idle_.expires_after(std::chrono::seconds(5));
                self->idle_.async_wait([weak = self->weak_from_this()](beast::error_code ec) {
                    auto s = weak.lock();
                    if (s && !ec && !s->served_any_ && s->buffer_.size() == 0) s->close();
                });
            }
        });
    }

private:
    Gateway& gw() { return shared_.gateway; }
    beast::tcp_stream& tcp_layer() { return beast::get_lowest_layer(stream_); }
    const HttpServerOptions& opt() const { return shared_.options; }

    static constexpr size_t kHeaderLimit = 64 * 1024;

    // A request's header block is first read whole into buffer_ (so its raw bytes can be checked
    // for what Beast's parser silently accepts: obsolete line folding), then parsed from there.
    void do_read() {
        parser_.emplace();
        parser_->body_limit(opt().max_body_bytes);
        parser_->header_limit(kHeaderLimit);
        // While draining, a connection gets a few seconds, not the full request timeout, to send.
        tcp_layer().expires_after(millis(shared_.draining ? std::min(opt().request_timeout, 5.0) : opt().request_timeout));
        read_header_block();
    }

    void read_header_block() {
        const std::string_view have(static_cast<const char*>(buffer_.data().data()), buffer_.size());
        if (!have.empty()) reading_.set(true);
        const size_t end = have.find("\r\n\r\n");
        if (end != std::string_view::npos || have.size() > kHeaderLimit) {
            if (end != std::string_view::npos && has_obs_fold(have.substr(0, end + 2))) {
                begin_request();
                keep_alive_ = false;
                return send_error(ApiError::invalid("a header line is folded onto the next line (obsolete line "
                                                    "folding, RFC 9112 section 5.2); send each header on one line",
                                                    {}, "invalid_header"));
            }
            // Complete (or over the limit, which the parser reports): parse from the buffer.
            http::async_read_header(stream_, buffer_, *parser_,
                                    beast::bind_front_handler(&HttpSession::on_header, this->shared_from_this()));
            return;
        }
        stream_.async_read_some(buffer_.prepare(8192), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
            self->buffer_.commit(n);
            if (ec) return self->on_read(ec, 0);
            self->read_header_block();
        });
    }

    void begin_request() {
        started_ = Clock::now();
        request_id_ = gw().new_request_id();
        client_request_id_ = false;
        cors_.clear();
        method_ = "-";
        path_ = "-";
        key_name_ = "-";
        anthropic_ = false;
    }

    // Header checks that must come before the body is read: a refusal here closes the connection,
    // since the body's extent is unknown or untrusted.
    std::optional<ApiError> refuse_header(const http::request<http::string_body>& req) {
        int codings = 0;
        const auto [first, last] = req.equal_range(http::field::transfer_encoding);
        for (auto f = first; f != last; ++f) {
            ++codings;
            if (codings > 1 || !beast::iequals(trim(f->value()), "chunked"))
                // Anything but one plain "chunked" would leave the body's end to guesswork (RFC 9112
                // section 6.1: answer 400 and close), which is how requests get smuggled.
                return ApiError::invalid(fmt::format("Transfer-Encoding '{}' is not supported; send the body with "
                                                     "Content-Length or 'Transfer-Encoding: chunked'",
                                                     std::string(f->value())),
                                         {}, "invalid_header");
        }
        if (req.count(http::field::authorization) > 1)
            return ApiError::invalid("the request has more than one Authorization header; send one", {},
                                     "invalid_header");
        return std::nullopt;
    }

    static std::string_view trim(std::string_view v) {
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        return v;
    }

    void on_header(beast::error_code ec, size_t) {
        if (ec) return on_read(ec, 0);
        auto& req = parser_->get();
        if (auto refusal = refuse_header(req)) {
            begin_request();
            set_cors(req);
            method_ = std::string(req.method_string());
            path_ = std::string(req.target().substr(0, req.target().find('?')));
            keep_alive_ = false;
            return send_error(*refusal);
        }
        if (beast::iequals(req[http::field::expect], "100-continue")) {
            // curl and others wait for this before sending a body.
            continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
            net::async_write(stream_, net::buffer(*continue_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
                if (ec) return self->close();
                http::async_read(self->stream_, self->buffer_, *self->parser_,
                                 beast::bind_front_handler(&HttpSession::on_read, self));
            });
            return;
        }
        http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, this->shared_from_this()));
    }

    void on_read(beast::error_code ec, size_t) {
        if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) return close();
        begin_request();
        if (ec == beast::error::timeout) {
            if (buffer_.size() > 0 || parser_->got_some())
                log_info("{} connection timed out while sending its request", request_id_);
            return close();
        }
        if (ec == http::error::body_limit || ec == http::error::header_limit) {
            keep_alive_ = false;
            if (parser_->is_header_done()) {
                set_cors(parser_->get());
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
        served_any_ = true;
        keep_alive_ = req.keep_alive() && !shared_.draining;
        method_ = std::string(req.method_string());
        std::string_view target = req.target();
        path_ = std::string(target.substr(0, target.find('?')));
        if (auto rid = req["x-request-id"]; valid_request_id(rid)) {
            request_id_ = std::string(rid);
            client_request_id_ = true;
        }
        // Anthropic's clients send their key as x-api-key; it counts as a bearer token.
        anthropic_ = path_ == "/v1/messages" || path_ == "/v1/messages/count_tokens";
        set_cors(req);
        std::string auth(req[http::field::authorization]);
        if (auth.empty() && !req["x-api-key"].empty()) auth = "Bearer " + std::string(req["x-api-key"]);
        try {
            if (req.method() == http::verb::options && shared_.cors.enabled()) return preflight(req);
            route(req, auth);
        } catch (const ApiError& e) {
            send_error(e);
        } catch (const std::exception& e) {
            log_error("{} {} {}: internal error: {}", request_id_, method_, path_, e.what());
            send_error(ApiError::internal(e.what()));
        }
    }

    // CORS (cors.h): the headers every answer to this request carries.
    void set_cors(const http::request<http::string_body>& req) { cors_ = shared_.cors.answer_headers(req[http::field::origin]); }

    // A browser's preflight OPTIONS: 204 with the Access-Control-* headers for an allowed origin
    // (no key needed: browsers never send one here), 403 for any other.
    void preflight(const http::request<http::string_body>& req) {
        const std::string_view origin = req[http::field::origin];
        if (!shared_.cors.allows(origin))
            throw ApiError(403, fmt::format("cross-origin requests from '{}' are not allowed (serve --cors-origin)",
                                            origin.empty() ? "(no Origin header)" : std::string(origin)),
                           "invalid_request_error", {}, "origin_not_allowed");
        std::vector<Header> headers = shared_.cors.preflight_headers(origin, req[http::field::access_control_request_headers]);
        headers.push_back({"X-Request-Id", request_id_});
        headers.push_back({"Server", "pagoda"});
        headers.push_back({"Connection", keep_alive_ ? "keep-alive" : "close"});
        log_request(204);
        response_done_ = true;
        enqueue(format_head(204, headers));  // 204: no body, so no Content-Length either
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
        if (path_ == "/livez" || path_ == "/readyz") {
            require_method(req, http::verb::get, "GET");
            if (!opt_open_health()) authenticate(auth);
            return send_simple(path_ == "/livez" ? gw().liveness() : gw().readiness());
        }
        if (path_ == "/metrics") {
            require_method(req, http::verb::get, "GET");
            if (!opt_open_metrics()) authenticate(auth);
            return send_simple(gw().metrics());
        }
        if (path_ == "/v1/state" || is_dashboard_path(path_)) {  // the page is open; its data is /metrics's
            require_method(req, http::verb::get, "GET");
            if (path_ != "/v1/state") return send_simple(dashboard_file(path_));
            if (!opt_open_metrics()) authenticate(auth);
            return send_simple(gw().live_state());
        }
        if (path_ == "/v1/models") {
            require_method(req, http::verb::get, "GET");
            authenticate(auth);
            return send_simple(gw().models());
        }
        if (path_.starts_with("/v1/models/")) {  // the official clients' models.retrieve(id)
            require_method(req, http::verb::get, "GET");
            authenticate(auth);
            return send_simple(gw().model(percent_decode(path_.substr(11))));
        }
        if (path_ == "/tokenize" || path_ == "/detokenize") {
            require_method(req, http::verb::post, "POST");
            authenticate(auth);
            const json body = parse_json_body(req.body());
            return send_simple(path_ == "/tokenize" ? gw().tokenize(body) : gw().detokenize(body));
        }
        if (path_ == "/v1/ws") {
            require_method(req, http::verb::get, "GET");
            if (!websocket::is_upgrade(req))
                throw ApiError(426, "GET /v1/ws needs a WebSocket upgrade", "invalid_request_error", {}, "upgrade_required");
            const ApiKey* key = authenticate(auth);
            log_info("{} GET /v1/ws 101 key={}", request_id_, key_name_);
            tcp_layer().expires_never();
            reading_.set(false);  // counted as an open WebSocket from here
            start_websocket_session(std::move(stream_), shared_, key, request_id_, std::move(req));
            return;
        }
        if (path_.starts_with("/v1/responses/") && path_.find('/', 14) == std::string::npos) {  // a stored response
            if (req.method() != http::verb::delete_) require_method(req, http::verb::get, "GET, DELETE");
            authenticate(auth);
            const std::string id = percent_decode(path_.substr(14));
            return send_simple(req.method() == http::verb::get ? gw().stored_response(id) : gw().delete_response(id));
        }
        if (path_ == "/v1/messages/count_tokens") {
            require_method(req, http::verb::post, "POST");
            const ApiKey* key = authenticate(auth);
            return send_simple(gw().count_message_tokens(parse_json_body(req.body()), key));
        }
        Endpoint endpoint;
        if (path_ == "/v1/completions") endpoint = Endpoint::completions;
        else if (path_ == "/v1/responses") endpoint = Endpoint::responses;
        else if (path_ == "/v1/chat/completions") endpoint = Endpoint::chat_completions;
        else if (path_ == "/v1/embeddings") endpoint = Endpoint::embeddings;
        else if (path_ == "/v1/messages") endpoint = Endpoint::chat_completions;  // translated: start_messages()
        else if (path_ == "/infill") endpoint = Endpoint::infill;
        else throw ApiError::not_found(fmt::format("no route for {} {}", method_, path_));
        require_method(req, http::verb::post, "POST");
        const ApiKey* key = authenticate(auth);
        nlohmann::ordered_json body;  // keys in the order sent: JSON schemas keep their properties' order
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

    void start_completion(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key) {
        // A generation may run far longer than the request timeout. This must happen before any
        // write starts: Beast applies a new expiry only to operations not yet pending, and later
        // writes would inherit the old deadline.
        tcp_layer().expires_never();
        // The sink keeps the connection alive until the engine's last delta (it always comes:
        // finished, cancelled or failed), so a request is never dropped unanswered.
        auto self = this->shared_from_this();
        auto executor = stream_.get_executor();
        auto sink = [self, executor](size_t sub, const engine::Delta& d) {
            net::post(executor, [self, sub, d] { self->on_delta(sub, d); });
        };
        // Without the client's X-Request-Id the response id is the one in our header; with it, a
        // fresh one (a client's id is echoed, never trusted to be unique).
        const std::string response_id = client_request_id_ ? std::string() : request_id_;
        job_ = anthropic_ ? gw().start_messages(body, key, request_id_, sink, response_id)
                          : gw().start(endpoint, body, key, request_id_, sink, response_id);
        reading_.set(false);  // an active job from here
        client_gone_ = false;
        response_done_ = false;
        if (job_->stream()) {
            streaming_ = true;
            enqueue(format_head(200, {{"Content-Type", "text/event-stream; charset=utf-8"},
                                      {"Cache-Control", "no-cache"},
                                      {"Transfer-Encoding", "chunked"},
                                      {"X-Request-Id", request_id_},
                                      {"Connection", keep_alive_ ? "keep-alive" : "close"}},
                                     cors_));
            for (const auto& chunk : job_->opening_chunks()) enqueue(http_chunk(frame(chunk)));
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
            for (const auto& chunk : chunks) enqueue(http_chunk(frame(chunk)));
        if (!job_->done()) return;
        const auto& a = job_->assembler();
        const std::optional<ApiError> failure = job_->failure();
        if (streaming_) {
            // A failed stream still ends properly: an error event, [DONE], the last chunk. A
            // Responses stream has already ended with its last event (response.completed, .failed);
            // Anthropic's ends with message_stop (or an error event).
            if (anthropic_) {
                if (failure) enqueue(http_chunk(anthropic_sse(anthropic_error_body(*failure))));
            } else if (!job_->responses()) {
                if (failure) {
                    enqueue(http_chunk(sse_data(dump_json(failure->body()))));
                } else if (a.context().include_usage) {
                    enqueue(http_chunk(sse_data(dump_json(a.usage_chunk()))));
                }
                enqueue(http_chunk(sse_done()));
            }
            enqueue("0\r\n\r\n");
            heartbeat_.cancel();
            finish_job(failure ? failure->status : 200);
            return;
        }
        if (failure) {
            finish_job(failure->status);  // releases the job (and `a`)
            return send_error(*failure);
        }
        std::string body = dump_json(job_->response());
        finish_job(200);
        send_body(200, "application/json", body, {});
    }

    // One chunk of a stream as SSE: Responses and Anthropic events are named (each its own way);
    // chat and completion chunks are data only.
    std::string frame(const json& chunk) const {
        if (anthropic_) return anthropic_sse(chunk);
        return job_->responses() ? responses_sse(chunk) : sse_data(dump_json(chunk));
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
        heartbeat_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
            auto self = weak.lock();
            if (ec || !self || !self->job_ || self->response_done_ || self->client_gone_) return;
            if (Clock::now() - self->last_write_ >= millis(self->opt().heartbeat_seconds) - std::chrono::milliseconds(50))
                self->enqueue(http_chunk(sse_comment("ping")));
            self->arm_heartbeat();
        });
    }

    void start_watch() {
        watching_ = true;
        auto done = beast::bind_front_handler(&HttpSession::on_watch, this->shared_from_this());
        // Under TLS the watch reads through the TLS layer (bytes there are records, not requests).
        if constexpr (kTls) stream_.async_read_some(buffer_.prepare(4096), std::move(done));
        else tcp_layer().socket().async_read_some(buffer_.prepare(4096), std::move(done));
    }

    void on_watch(beast::error_code ec, size_t n) {
        watching_ = false;
        if (ec == net::error::eof && ((job_ && !response_done_) || writing_)) {
            // A FIN after a complete request is a half-close (`nc -N`, shutdown(SHUT_WR)): the client
            // still reads, so answer (or finish writing the answer), then close. A client that closed
            // entirely looks the same from here; a stream finds out at its next write (the peer
            // answers it with a reset), a plain response when it is written.
            keep_alive_ = false;
            return;
        }
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
            writing_.set(false);
            return after_write();
        }
        writing_.set(true);
        reading_.set(false);  // the answer is on its way out
        net::async_write(stream_, net::buffer(outbox_.front()), beast::bind_front_handler(&HttpSession::on_write, this->shared_from_this()));
    }

    void on_write(beast::error_code ec, size_t) {
        outbox_.pop_front();
        last_write_ = Clock::now();
        if (ec) {
            writing_.set(false);
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
            idle_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
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
        // A draining server sends clients elsewhere: no keep-alive on its 503s.
        if (e.status == 413 || e.status == 431 || e.code == "shutting_down") keep_alive_ = false;
        send_body(e.status, "application/json", dump_json(anthropic_ ? anthropic_error_body(e) : e.body()), extra);
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
        for (const auto& h : cors_) headers.push_back(h);
        response_done_ = true;
        enqueue(format_head(status, headers) + body);
    }

    // After the last byte: half-close, then discard what the client still sends (a body we refused)
    // for a moment, so it reads our answer instead of a reset.
    void close_after_send() {
        beast::error_code ec;
        tcp_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
        if (watching_) {  // the watch read sees the client's EOF and closes; bound the wait
            idle_.expires_after(std::chrono::seconds(2));
            idle_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->close();
            });
            return;
        }
        drain_ = std::make_shared<std::array<char, 8192>>();
        tcp_layer().expires_after(std::chrono::seconds(2));
        drain();
    }

    void drain() {
        stream_.async_read_some(net::buffer(*drain_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->close();
            self->drain();
        });
    }

    void close() {
        reading_.set(false);
        beast::error_code ec;
        tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ec);
        tcp_layer().socket().close(ec);
    }

    Stream stream_;
    ServerShared& shared_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<std::string> continue_;
    std::shared_ptr<std::array<char, 8192>> drain_;
    net::steady_timer heartbeat_, idle_;
    std::deque<std::string> outbox_;
    CountedFlag writing_;
    CountedFlag reading_;
    bool served_any_ = false;
    bool watching_ = false, keep_alive_ = true, client_request_id_ = false;
    bool streaming_ = false, response_done_ = false, client_gone_ = false;
    bool anthropic_ = false;  // this request is on an Anthropic route: its errors and events take that shape
    std::shared_ptr<Job> job_;
    int status_ = 0;
    std::string request_id_, method_ = "-", path_ = "-", key_name_ = "-", allow_;
    std::vector<Header> cors_;  // this request's CORS headers (set_cors)
    Clock::time_point started_ = Clock::now(), last_write_ = Clock::now();
};

}  // namespace

void start_http_session(tcp::socket socket, ServerShared& shared) {
    if (shared.tls) std::make_shared<HttpSession<TlsStream>>(shared, std::move(socket), *shared.tls)->start();
    else std::make_shared<HttpSession<PlainStream>>(shared, std::move(socket))->start();
}

}  // namespace pagoda::server::transport
