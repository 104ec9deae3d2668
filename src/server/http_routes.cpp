#include "server/http_routes.h"

#include <array>
#include <boost/beast/websocket.hpp>
#include <fmt/format.h>

#include "server/dashboard.h"
#include "server/model_reload_request.h"

namespace pagoda::server::transport {
namespace {

using http::verb;

void send(RouteSession& s, const SimpleResponse& r) { s.send_simple(r); }

// A JSON body for an engine job; a body that is not JSON counts as an invalid request of the key.
void start_job(RouteSession& s, HttpRequest& req, const ApiKey* key, Endpoint endpoint) {
    nlohmann::ordered_json body;  // keys in the order sent: JSON schemas keep their properties' order
    try {
        body = parse_json_body(req.body());
    } catch (const ApiError&) {
        s.router().record_rejection(key, "invalid");
        throw;
    }
    s.start_completion(endpoint, body, key);
}

// A simple answer from the gateway of the body's model, once that model is loaded.
void on_model(RouteSession& s, json body, std::function<SimpleResponse(Gateway&, const json&)> answer) {
    const std::string model = ModelRouter::model_of(body);
    body = s.router().with_model_id(body);  // an alias names its model
    s.with_model(model, [&s, body = std::move(body), answer](Gateway& g, const std::shared_ptr<Gateway>&) {
        send(s, answer(g, body));
    });
}

template <Endpoint E>
void job_route(RouteSession& s, HttpRequest& req, const ApiKey* key) {
    start_job(s, req, key, E);
}

const std::array kRoutes = {
    Route{"/health", false, verb::get, verb::unknown, "GET", Access::key_unless_open_health,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().health()); }},
    Route{"/livez", false, verb::get, verb::unknown, "GET", Access::key_unless_open_health,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().liveness()); }},
    Route{"/readyz", false, verb::get, verb::unknown, "GET", Access::key_unless_open_health,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().readiness()); }},
    Route{"/metrics", false, verb::get, verb::unknown, "GET", Access::key_unless_open_metrics,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().metrics()); }},
    // The dashboard page is open; its data is /metrics's.
    Route{"/v1/state", false, verb::get, verb::unknown, "GET", Access::key_unless_open_metrics,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().live_state()); }},
    Route{"/dashboard", false, verb::get, verb::unknown, "GET", Access::open,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, dashboard_file(s.path())); }},
    Route{"/dashboard/", true, verb::get, verb::unknown, "GET", Access::open,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, dashboard_file(s.path())); }},
    Route{"/v1/models", false, verb::get, verb::unknown, "GET", Access::key,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().models()); }},
    // The official clients' models.retrieve(id).
    Route{"/v1/models/", true, verb::get, verb::unknown, "GET", Access::key,
          [](RouteSession& s, HttpRequest&, const ApiKey*) {
              send(s, s.router().model(percent_decode(s.path().substr(11))));
          }},
    Route{"/tokenize", false, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey*) {
              on_model(s, parse_json_body(req.body()), [](Gateway& g, const json& body) { return g.tokenize(body); });
          }},
    Route{"/detokenize", false, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey*) {
              on_model(s, parse_json_body(req.body()), [](Gateway& g, const json& body) { return g.detokenize(body); });
          }},
    // Several models: reload one beside its running version (model_router.h); admin keys only.
    Route{"/admin/models/", true, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey* key) {
              send(s, s.router().reload(parse_reload_request(s.path(), req.body()), key));
          }},
    Route{"/v1/ws", false, verb::get, verb::unknown, "GET", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey* key) { s.upgrade_websocket(key, std::move(req)); }},
    // A stored response: /v1/responses/{id} (one segment).
    Route{"/v1/responses/", true, verb::get, verb::delete_, "GET, DELETE", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey*) {
              const std::string id = percent_decode(s.path().substr(14));
              send(s, req.method() == verb::get ? s.router().stored_response(id) : s.router().delete_response(id));
          }},
    Route{"/v1/messages/count_tokens", false, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey* key) {
              on_model(s, parse_json_body(req.body()),
                       [key](Gateway& g, const json& body) { return g.count_message_tokens(body, key); });
          }},
    Route{"/v1/completions", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::completions>},
    Route{"/v1/responses", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::responses>},
    Route{"/v1/chat/completions", false, verb::post, verb::unknown, "POST", Access::key,
          job_route<Endpoint::chat_completions>},
    Route{"/v1/embeddings", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::embeddings>},
    // Translated to a chat request by the session (Gateway::start_messages).
    Route{"/v1/messages", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::chat_completions>},
    Route{"/infill", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::infill>},
    // Relevance scores (gateway_rerank.cpp): Jina's and Cohere's path, llama-server's, and vLLM's.
    Route{"/v1/rerank", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::rerank>},
    Route{"/rerank", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::rerank>},
    Route{"/v1/score", false, verb::post, verb::unknown, "POST", Access::key, job_route<Endpoint::score>},
    // LoRA adapters (model_router_lora.cpp, gateway_lora.cpp): vLLM's run-time load / unload, llama-server's list.
    Route{"/v1/load_lora_adapter", false, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey* key) {
              send(s, s.router().load_lora_adapter(parse_json_body(req.body()), key));
          }},
    Route{"/v1/unload_lora_adapter", false, verb::post, verb::unknown, "POST", Access::key,
          [](RouteSession& s, HttpRequest& req, const ApiKey* key) {
              send(s, s.router().unload_lora_adapter(parse_json_body(req.body()), key));
          }},
    Route{"/lora-adapters", false, verb::get, verb::unknown, "GET", Access::key,
          [](RouteSession& s, HttpRequest&, const ApiKey*) { send(s, s.router().lora_adapters()); }},
};

bool matches(const Route& r, std::string_view path) {
    if (!r.prefix) return path == r.path;
    if (!path.starts_with(r.path)) return false;
    // A stored response's id is one segment: /v1/responses/{id}/more is no route.
    return r.path != "/v1/responses/" || path.find('/', r.path.size()) == std::string_view::npos;
}

}  // namespace

const Route* find_route(std::string_view path) {
    for (const Route& r : kRoutes)
        if (matches(r, path)) return &r;
    return nullptr;
}

void dispatch_route(RouteSession& session, HttpRequest& request, std::string& allow) {
    const std::string& path = session.path();
    const Route* route = find_route(path);
    const std::string method(request.method_string());
    if (!route) throw ApiError::not_found(fmt::format("no route for {} {}", method, path));
    if (request.method() != route->method && request.method() != route->also) {
        allow = route->allowed;
        throw ApiError::method_not_allowed(fmt::format("{} {} is not allowed; use {}", method, path, route->allowed));
    }
    if (route->path == "/v1/ws" && !beast::websocket::is_upgrade(request))
        throw ApiError(426, "GET /v1/ws needs a WebSocket upgrade", "invalid_request_error", {}, "upgrade_required");
    const ApiKey* key = nullptr;
    switch (route->access) {
        case Access::open: break;
        case Access::key: key = session.authenticate(); break;
        case Access::key_unless_open_health:
            if (!session.router().open_health()) key = session.authenticate();
            break;
        case Access::key_unless_open_metrics:
            if (!session.router().open_metrics()) key = session.authenticate();
            break;
    }
    route->handle(session, request, key);
}

}  // namespace pagoda::server::transport
