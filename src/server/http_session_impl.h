// Internal to the HTTP session's files: the session class, shared by http_session.cpp (reading a
// request, routing it, writing answers, closing) and http_session_job.cpp (an engine job's answer:
// JSON or a stream with heartbeats, while the socket is watched for a client that leaves). Each file
// defines its members and instantiates them for both transports.
#pragma once
#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/http_routes.h"

namespace pagoda::server::transport {

// One session's code for both transports: Stream is PlainStream or TlsStream (http_common.h). What
// differs is only the TLS handshake at the start and the TCP layer under the stream (timeouts,
// shutdown), reached through tcp_layer().
template <class Stream>
class HttpSession : public GoingAway,
                    public RouteSession,
                    public std::enable_shared_from_this<HttpSession<Stream>> {
public:
    static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

    template <class... StreamArgs>
    explicit HttpSession(ServerShared& shared, StreamArgs&&... stream_args)
        : stream_(std::forward<StreamArgs>(stream_args)...),
          shared_(shared),
          heartbeat_(stream_.get_executor()),
          idle_(stream_.get_executor()),
          model_wait_(stream_.get_executor()),
          writing_(shared.writes_in_progress),
          reading_(shared.reads_in_progress) {}

    void start();
    // The server began to drain: no more keep-alive (see the definition).
    void going_away() override;

    // RouteSession (http_routes.h).
    ModelRouter& router() override { return shared_.router; }
    const std::string& path() const override { return path_; }
    const ApiKey* authenticate() override;
    void send_simple(const SimpleResponse& r) override;
    void start_completion(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key) override;
    void with_model(const std::string& model, ModelTask run) override;
    void upgrade_websocket(const ApiKey* key, HttpRequest&& req) override;

private:
    beast::tcp_stream& tcp_layer() { return beast::get_lowest_layer(stream_); }
    const HttpServerOptions& opt() const { return shared_.options; }

    static constexpr size_t kHeaderLimit = 64 * 1024;

    // ---- reading and routing (http_session.cpp) ----
    void do_read();
    void read_header_block();
    void begin_request();
    void on_header(beast::error_code ec, size_t);
    void on_read(beast::error_code ec, size_t);
    void handle(HttpRequest req);
    void set_cors(const HttpRequest& req);
    void preflight(const HttpRequest& req);

    // ---- an engine job's answer and the socket watch (http_session_job.cpp) ----
    void start_job_on(Gateway& gateway, const std::shared_ptr<Gateway>& owner, Endpoint endpoint,
                      const nlohmann::ordered_json& body, const ApiKey* key);
    void on_delta(size_t sub, const engine::Delta& d);
    std::string frame(const json& chunk) const;
    void finish_job(int status);
    void arm_heartbeat();
    void start_watch();
    void on_watch(beast::error_code ec, size_t n);

    // ---- writing (http_session.cpp) ----
    void enqueue(std::string data);
    void write_next();
    void on_write(beast::error_code ec, size_t);
    void after_write();
    void send_error(const ApiError& e);
    void log_request(int status);
    void send_body(int status, const std::string& content_type, const std::string& body, std::vector<Header> extra);
    void close_after_send();
    void drain();
    void close();

    Stream stream_;
    ServerShared& shared_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<std::string> continue_;
    std::shared_ptr<std::array<char, 8192>> drain_;
    net::steady_timer heartbeat_, idle_;
    net::steady_timer model_wait_;  // polls ModelRouter::route() while the request's model loads
    std::unique_ptr<ModelRegistry::Wait> model_hold_;  // the request's place in that model's queue
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
    std::string credentials_;   // this request's (http_auth.h)
    std::vector<Header> cors_;  // this request's CORS headers (set_cors)
    Clock::time_point started_ = Clock::now(), last_write_ = Clock::now();
};

}  // namespace pagoda::server::transport
