// The HTTP session's engine jobs (http_session_impl.h): a completion's answer as one JSON body or
// as a chunked SSE stream with heartbeat comments, and the watch on the socket while the engine
// works, so a client that hangs up gets its generation cancelled (and a half-close still gets its
// answer).
#include <fmt/format.h>

#include "core/log.h"
#include "server/http_session_impl.h"
#include "server/responses_events.h"
#include "server/sse.h"

namespace pagoda::server::transport {

template <class Stream>
void HttpSession<Stream>::with_model(const std::string& model, ModelTask run) {
    std::shared_ptr<Gateway> gateway = router().route(model, model_hold_);
    if (gateway) return run(*gateway, gateway);
    // The model is loading: poll again shortly, the request keeping its place in the queue. A load
    // may take far longer than the request timeout, so the socket gets no deadline meanwhile.
    tcp_layer().expires_never();
    model_wait_.expires_after(std::chrono::milliseconds(20));
    model_wait_.async_wait([self = this->shared_from_this(), model, run = std::move(run)](beast::error_code ec) {
        if (ec) return;
        try {
            self->with_model(model, run);
        } catch (const ApiError& e) {
            self->model_hold_.reset();
            self->send_error(e);
        } catch (const std::exception& e) {
            self->model_hold_.reset();
            log_error("{} {} {}: internal error: {}", self->request_id_, self->method_, self->path_, e.what());
            self->send_error(ApiError::internal(e.what()));
        }
    });
}

template <class Stream>
void HttpSession<Stream>::start_completion(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key) {
    with_model(ModelRouter::model_of(body), [this, endpoint, body = router().with_model_id(body), key](
                                                Gateway& gateway, const std::shared_ptr<Gateway>& owner) {
        start_job_on(gateway, owner, endpoint, body, key);
    });
}

template <class Stream>
void HttpSession<Stream>::start_job_on(Gateway& gateway, const std::shared_ptr<Gateway>& owner, Endpoint endpoint,
                                       const nlohmann::ordered_json& body, const ApiKey* key) {
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
    job_ = anthropic_ ? gateway.start_messages(body, key, request_id_, sink, response_id)
                      : gateway.start(endpoint, body, key, request_id_, sink, response_id);
    job_->keep_alive(owner);
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

template <class Stream>
void HttpSession<Stream>::on_delta(size_t sub, const engine::Delta& d) {
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
template <class Stream>
std::string HttpSession<Stream>::frame(const json& chunk) const {
    if (anthropic_) return anthropic_sse(chunk);
    return job_->responses() ? responses_sse(chunk) : sse_data(dump_json(chunk));
}

template <class Stream>
void HttpSession<Stream>::finish_job(int status) {
    response_done_ = true;
    status_ = status;
    if (job_) job_->finish(status);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    log_info("{} {} {} {} {:.1f} ms key={}{}", request_id_, method_, path_, status, ms, key_name_,
             client_gone_ ? " (client disconnected: cancelled)" : "");
    job_.reset();
}

template <class Stream>
void HttpSession<Stream>::arm_heartbeat() {
    heartbeat_.expires_after(millis(opt().heartbeat_seconds));
    heartbeat_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || !self->job_ || self->response_done_ || self->client_gone_) return;
        if (Clock::now() - self->last_write_ >= millis(self->opt().heartbeat_seconds) - std::chrono::milliseconds(50))
            self->enqueue(http_chunk(sse_comment("ping")));
        self->arm_heartbeat();
    });
}

template <class Stream>
void HttpSession<Stream>::start_watch() {
    watching_ = true;
    auto done = beast::bind_front_handler(&HttpSession::on_watch, this->shared_from_this());
    // Under TLS the watch reads through the TLS layer (bytes there are records, not requests).
    if constexpr (kTls) stream_.async_read_some(buffer_.prepare(4096), std::move(done));
    else tcp_layer().socket().async_read_some(buffer_.prepare(4096), std::move(done));
}

template <class Stream>
void HttpSession<Stream>::on_watch(beast::error_code ec, size_t n) {
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

// The members defined in this file, for both transports (the rest come from http_session.cpp).
#define PAGODA_HTTP_SESSION_JOB_MEMBERS(S)                                                      \
    template void HttpSession<S>::start_completion(Endpoint, const nlohmann::ordered_json&, const ApiKey*);      \
    template void HttpSession<S>::with_model(const std::string&, ModelTask);                   \
    template void HttpSession<S>::start_job_on(Gateway&, const std::shared_ptr<Gateway>&, Endpoint,               \
                                               const nlohmann::ordered_json&, const ApiKey*);   \
    template void HttpSession<S>::on_delta(size_t, const engine::Delta&);                      \
    template std::string HttpSession<S>::frame(const json&) const;                             \
    template void HttpSession<S>::finish_job(int);                                             \
    template void HttpSession<S>::arm_heartbeat();                                             \
    template void HttpSession<S>::start_watch();                                               \
    template void HttpSession<S>::on_watch(beast::error_code, size_t);
PAGODA_HTTP_SESSION_JOB_MEMBERS(PlainStream)
PAGODA_HTTP_SESSION_JOB_MEMBERS(TlsStream)
#undef PAGODA_HTTP_SESSION_JOB_MEMBERS

}  // namespace pagoda::server::transport
