#include "server/websocket_session.h"

#include <cmath>
#include <deque>
#include <fmt/format.h>
#include <map>

#include <boost/beast/websocket/ssl.hpp>

#include "core/log.h"
#include "server/ws_message.h"

namespace pagoda::server::transport {
namespace {

namespace websocket = beast::websocket;

// Next: the stream under the WebSocket, PlainStream or TlsStream.
template <class Next>
class WebSocketSession : public GoingAway, public std::enable_shared_from_this<WebSocketSession<Next>> {
public:
    WebSocketSession(Next stream, ServerShared& shared, const ApiKey* key, std::string conn_id)
        : ws_(std::move(stream)), shared_(shared), key_(key), conn_id_(std::move(conn_id)), writing_(shared.writes_in_progress) {}
    ~WebSocketSession() override {
        if (accepted_) --shared_.open_websockets;
    }

    // Server shutdown: once what is queued is written, a Close frame (1001 going away).
    void going_away() override {
        net::post(ws_.get_executor(), [self = this->shared_from_this()] {
            if (self->closed_ || self->closing_) return;
            self->closing_ = true;
            if (!self->writing_) self->send_close();
        });
    }

    void run(http::request<http::string_body> req) {
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.set_option(websocket::stream_base::decorator(
            [](websocket::response_type& res) { res.set(http::field::server, "pagoda"); }));
        ws_.read_message_max(shared_.options.max_body_bytes);
        ws_.async_accept(req, beast::bind_front_handler(&WebSocketSession::on_accept, this->shared_from_this()));
    }

private:
    struct Entry {
        std::shared_ptr<Job> job;
        json client_id;
        uint64_t serial = 0;
    };

    void on_accept(beast::error_code ec) {
        if (ec) return;
        accepted_ = true;
        ++shared_.open_websockets;
        shared_.websockets.add(this->weak_from_this());
        log_info("{} websocket open", conn_id_);
        do_read();
    }

    void do_read() { ws_.async_read(buffer_, beast::bind_front_handler(&WebSocketSession::on_read, this->shared_from_this())); }

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
        WsMessage msg;
        try {
            decode_ws_envelope(message, text, msg);
            const std::string& key = msg.key;
            if (msg.cancel) {
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
            const WsRequestTarget target = ws_request_target(msg);
            const json& id = msg.id;

            const uint64_t serial = ++serial_;
            auto self = this->shared_from_this();  // alive until the engine's last delta
            auto executor = ws_.get_executor();
            auto sink = [self, executor, key, serial](size_t sub, const engine::Delta& d) {
                net::post(executor, [self, key, serial, sub, d] { self->on_delta(key, serial, sub, d); });
            };
            // The request's model (model_router.h): while it loads, the message is handled again
            // shortly, keeping its place in the model's queue.
            std::shared_ptr<Gateway> gateway = shared_.router.route(ModelRouter::model_of(*target.body), holds_[key]);
            if (!gateway) {
                auto timer = std::make_shared<net::steady_timer>(ws_.get_executor(), std::chrono::milliseconds(20));
                timer->async_wait([self, timer, message, text](beast::error_code ec) {
                    if (!ec && !self->closed_) self->handle(message, text);
                });
                return;
            }
            holds_.erase(key);
            const std::string request_id = shared_.router.new_request_id();
            auto job = gateway->start(target.endpoint, shared_.router.with_model_id(*target.body), key_, request_id, sink);
            job->keep_alive(gateway);
            jobs_[key] = Entry{job, id, serial};
            for (auto& chunk : job->opening_chunks()) send(json{{"id", id}, {"chunk", std::move(chunk)}});
        } catch (const ApiError& e) {
            holds_.erase(msg.key);
            send_error(msg.id, e);
        } catch (const std::exception& e) {
            holds_.erase(msg.key);
            send_error(msg.id, ApiError::internal(e.what()));
        }
    }

    void on_delta(const std::string& key, uint64_t serial, size_t sub, const engine::Delta& d) {
        auto it = jobs_.find(key);
        if (it == jobs_.end() || it->second.serial != serial || closed_) return;
        Entry& e = it->second;
        for (auto& chunk : e.job->add(sub, d)) send(json{{"id", e.client_id}, {"chunk", std::move(chunk)}});
        if (!e.job->done()) return;
        if (const std::optional<ApiError> failure = e.job->failure()) {
            send_error(e.client_id, *failure);
            e.job->finish(failure->status);
        } else {
            send(json{{"id", e.client_id}, {"done", true}, {"usage", e.job->assembler().usage()}});
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
            writing_.set(false);
            if (closing_ && !closed_) send_close();
            return;
        }
        writing_.set(true);
        ws_.text(true);
        ws_.async_write(net::buffer(outbox_.front()), beast::bind_front_handler(&WebSocketSession::on_write, this->shared_from_this()));
    }

    void on_write(beast::error_code ec, size_t) {
        outbox_.pop_front();
        if (ec) {
            closed_ = true;  // the read side sees the failure too and cancels the requests
            writing_.set(false);
            return;
        }
        write_next();
    }

    void send_close() {
        closed_ = true;  // nothing more is written; the pending read ends when the peer answers
        ws_.async_close(websocket::close_reason(websocket::close_code::going_away, "server shutting down"),
                        [self = this->shared_from_this()](beast::error_code) {});
    }

    websocket::stream<Next> ws_;
    beast::flat_buffer buffer_;
    ServerShared& shared_;
    const ApiKey* key_;
    std::string conn_id_;
    std::map<std::string, Entry> jobs_;
    std::map<std::string, std::unique_ptr<ModelRegistry::Wait>> holds_;  // messages waiting for their model to load
    std::deque<std::string> outbox_;
    CountedFlag writing_;
    bool closed_ = false, closing_ = false, accepted_ = false;
    uint64_t serial_ = 0;
};

}  // namespace

void start_websocket_session(PlainStream stream, ServerShared& shared, const ApiKey* key, std::string conn_id,
                             http::request<http::string_body> request) {
    std::make_shared<WebSocketSession<PlainStream>>(std::move(stream), shared, key, std::move(conn_id))->run(std::move(request));
}

void start_websocket_session(TlsStream stream, ServerShared& shared, const ApiKey* key, std::string conn_id,
                             http::request<http::string_body> request) {
    std::make_shared<WebSocketSession<TlsStream>>(std::move(stream), shared, key, std::move(conn_id))->run(std::move(request));
}

}  // namespace pagoda::server::transport
