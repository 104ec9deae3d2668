// The HTTP route table: which method(s) each path takes, whether it needs the caller's key, and
// the handler that answers it. A session looks the path up (find_route), then dispatch_route()
// checks the method (405 with Allow), authenticates as the route asks and runs the handler.
// Handlers act on the session only through RouteSession, so the table knows nothing of sockets.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_common.h"

namespace pagoda::server::transport {

using HttpRequest = http::request<http::string_body>;

// A handler's work on the gateway of its model; `owner` keeps that gateway alive (Job::keep_alive).
using ModelTask = std::function<void(Gateway& gateway, const std::shared_ptr<Gateway>& owner)>;

// What a route handler may ask of the session that received the request.
class RouteSession {
public:
    virtual ~RouteSession() = default;
    virtual ModelRouter& router() = 0;
    virtual const std::string& path() const = 0;
    // Checks the request's credentials (credentials.h); throws ApiError 401. nullptr: open server.
    virtual const ApiKey* authenticate() = 0;
    virtual void send_simple(const SimpleResponse& response) = 0;
    // Starts an engine job for `body` and answers as it runs (JSON, or SSE when it streams).
    virtual void start_completion(Endpoint endpoint, const nlohmann::ordered_json& body, const ApiKey* key) = 0;
    // Runs `run` on the gateway serving `model` (ModelRouter::route: "" is the default model): now
    // when it is loaded, else once it is, the request waiting in that model's queue meanwhile.
    // What `run` or the routing throws is answered as an error, as from a handler.
    virtual void with_model(const std::string& model, ModelTask run) = 0;
    // Hands the connection to a WebSocket session (the request is an authenticated upgrade).
    virtual void upgrade_websocket(const ApiKey* key, HttpRequest&& request) = 0;
};

// Who may call a route: anyone, a key holder, or a key holder unless the server opened the
// health (--open-health) or metrics (--open-metrics) endpoints.
enum class Access { open, key, key_unless_open_health, key_unless_open_metrics };

struct Route {
    std::string_view path;   // exact path, or the prefix when `prefix`
    bool prefix = false;     // matches every path that starts with `path`
    http::verb method = http::verb::post;
    http::verb also = http::verb::unknown;  // a second accepted method (unknown: none)
    const char* allowed = "POST";           // the Allow header of a 405
    Access access = Access::key;
    void (*handle)(RouteSession& session, HttpRequest& request, const ApiKey* key) = nullptr;
};

// The route for `path`, or nullptr (404).
const Route* find_route(std::string_view path);

// Answers `request` on `session` by its route (throws ApiError 404 when there is none, 405 for a
// method the route does not take after setting `allow`, 401 from authentication, and whatever the
// handler throws).
void dispatch_route(RouteSession& session, HttpRequest& request, std::string& allow);

}  // namespace pagoda::server::transport
