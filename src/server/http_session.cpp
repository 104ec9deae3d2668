#include "server/http_session.h"

#include <cmath>
#include <fmt/format.h>

#include "core/log.h"
#include "server/http_auth.h"
#include "server/http_session_impl.h"
#include "server/responses_events.h"
#include "server/websocket_session.h"

namespace pagoda::server::transport {

template <class Stream>
void HttpSession<Stream>::start() {
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
template <class Stream>
void HttpSession<Stream>::going_away() {
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

// A request's header block is first read whole into buffer_ (so its raw bytes can be checked
// for what Beast's parser silently accepts: obsolete line folding), then parsed from there.
template <class Stream>
void HttpSession<Stream>::do_read() {
    parser_.emplace();
    parser_->body_limit(opt().max_body_bytes);
    parser_->header_limit(kHeaderLimit);
    // While draining, a connection gets a few seconds, not the full request timeout, to send.
    tcp_layer().expires_after(millis(shared_.draining ? std::min(opt().request_timeout, 5.0) : opt().request_timeout));
    read_header_block();
}

template <class Stream>
void HttpSession<Stream>::read_header_block() {
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

template <class Stream>
void HttpSession<Stream>::begin_request() {
    started_ = Clock::now();
    request_id_ = router().new_request_id();
    client_request_id_ = false;
    cors_.clear();
    method_ = "-";
    path_ = "-";
    key_name_ = "-";
    anthropic_ = false;
}

template <class Stream>
void HttpSession<Stream>::on_header(beast::error_code ec, size_t) {
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

template <class Stream>
void HttpSession<Stream>::on_read(beast::error_code ec, size_t) {
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

template <class Stream>
void HttpSession<Stream>::handle(HttpRequest req) {
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
    credentials_ = request_credentials(req);
    try {
        if (req.method() == http::verb::options && shared_.cors.enabled()) return preflight(req);
        dispatch_route(*this, req, allow_);
    } catch (const ApiError& e) {
        send_error(e);
    } catch (const std::exception& e) {
        log_error("{} {} {}: internal error: {}", request_id_, method_, path_, e.what());
        send_error(ApiError::internal(e.what()));
    }
}

// A browser's preflight OPTIONS: 204 with the Access-Control-* headers for an allowed origin
// (no key needed: browsers never send one here), 403 for any other.
template <class Stream>
void HttpSession<Stream>::preflight(const HttpRequest& req) {
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

// CORS (cors.h): the headers every answer to this request carries.
template <class Stream>
void HttpSession<Stream>::set_cors(const HttpRequest& req) {
    cors_ = shared_.cors.answer_headers(req[http::field::origin]);
}

template <class Stream>
void HttpSession<Stream>::upgrade_websocket(const ApiKey* key, HttpRequest&& req) {
    log_info("{} GET /v1/ws 101 key={}", request_id_, key_name_);
    tcp_layer().expires_never();
    reading_.set(false);  // counted as an open WebSocket from here
    start_websocket_session(std::move(stream_), shared_, key, request_id_, std::move(req));
}

template <class Stream>
const ApiKey* HttpSession<Stream>::authenticate() {
    const ApiKey* key = router().authenticate(credentials_);
    key_name_ = key ? key->name : "anonymous";
    return key;
}

template <class Stream>
void HttpSession<Stream>::enqueue(std::string data) {
    outbox_.push_back(std::move(data));
    if (!writing_) write_next();
}

template <class Stream>
void HttpSession<Stream>::write_next() {
    if (outbox_.empty()) {
        writing_.set(false);
        return after_write();
    }
    writing_.set(true);
    reading_.set(false);  // the answer is on its way out
    net::async_write(stream_, net::buffer(outbox_.front()), beast::bind_front_handler(&HttpSession::on_write, this->shared_from_this()));
}

template <class Stream>
void HttpSession<Stream>::on_write(beast::error_code ec, size_t) {
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
template <class Stream>
void HttpSession<Stream>::after_write() {
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

template <class Stream>
void HttpSession<Stream>::send_simple(const SimpleResponse& r) {
    std::vector<Header> extra;
    if (r.retry_after) extra.push_back({"Retry-After", std::to_string(int64_t(std::ceil(*r.retry_after)))});
    log_request(r.status);
    send_body(r.status, r.content_type, r.body, extra);
}

template <class Stream>
void HttpSession<Stream>::send_error(const ApiError& e) {
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

template <class Stream>
void HttpSession<Stream>::log_request(int status) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    log_info("{} {} {} {} {:.1f} ms key={}", request_id_, method_, path_, status, ms, key_name_);
}

template <class Stream>
void HttpSession<Stream>::send_body(int status, const std::string& content_type, const std::string& body, std::vector<Header> extra) {
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
template <class Stream>
void HttpSession<Stream>::close_after_send() {
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

template <class Stream>
void HttpSession<Stream>::drain() {
    stream_.async_read_some(net::buffer(*drain_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->drain();
    });
}

template <class Stream>
void HttpSession<Stream>::close() {
    reading_.set(false);
    beast::error_code ec;
    tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp_layer().socket().close(ec);
}

// Everything defined in this file, for both transports (http_session_job.cpp defines the rest).
template class HttpSession<PlainStream>;
template class HttpSession<TlsStream>;

void start_http_session(tcp::socket socket, ServerShared& shared) {
    if (shared.tls) std::make_shared<HttpSession<TlsStream>>(shared, std::move(socket), *shared.tls)->start();
    else std::make_shared<HttpSession<PlainStream>>(shared, std::move(socket))->start();
}

}  // namespace pagoda::server::transport
