// What the transport talks to: the server's models, each a Gateway (its own engine, KV pool, chat
// template, rate limiter, metrics and stored responses). With one model (`serve -m A`) the router
// only forwards to that gateway, which loads at start, so the server behaves as it always has.
// With several (`-m A -m B`, --models-dir) a ModelRegistry keeps them: each loads on its first
// request within the memory budget, idle ones unload least recently used first, and a reload loads
// a new version beside the old (new requests go to the new one, requests in flight finish on the
// old one, which is then freed). Every request that names a model is routed by route(): the request's
// `model` (or the first model when it names none), 404 model_not_found for an id not served, and
// while the model loads the request waits in that model's queue (503 queue_full past --max-queue).
// Server-wide answers (/v1/models, /health, /readyz, /metrics) list every model with its state.
// LoRA adapters on several models belong to one base each (--lora MODEL:NAME=PATH): a request naming
// one goes to its base (loading it as any request would), and /v1/models lists it with `parent`.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/gateway.h"
#include "server/model_registry.h"
#include "server/model_reload_request.h"
#include "server/request_ids.h"

namespace pagoda::server {

// Opens the model of `source` and starts its engine (a ModelLoader for that path).
using SourceLoader = std::function<LoadedModel(const ModelSource& source, engine::EngineOptions options)>;

struct MultiModelOptions {
    GatewayOptions gateway;         // every model's gateway options (model_name is replaced by the id)
    std::vector<ModelSource> models;  // the first is the default (requests without `model`)
    int64_t memory_budget = 0;      // bytes; 0: no limit
    MemoryEstimate estimate;        // bytes a model takes loaded
    // LoRA adapters (--lora MODEL:NAME=PATH): adapter name -> its base's id. The base's loader loads
    // them with it; the router routes a request naming an adapter to its base and lists it.
    std::map<std::string, std::string> adapter_bases;
};

class ModelRouter {
public:
    // One model: forwards to `single` (which the caller owns and load() loads).
    explicit ModelRouter(Gateway& single);
    // Several models, loaded on demand. Throws pagoda::Error for a bad list or budget.
    ModelRouter(MultiModelOptions options, ApiKeyTable keys, SourceLoader loader);
    ~ModelRouter();

    bool multi() const { return registry_ != nullptr; }

    // The gateway serving `model` ("" or absent: the default) now, or nullptr while it loads: then
    // `hold` keeps the request's place in that model's queue until the caller calls again (a few
    // milliseconds later) or drops it. Throws ApiError: 404 model_not_found, 503 shutting_down,
    // queue_full or model_failed.
    std::shared_ptr<Gateway> route(const std::string& model, std::unique_ptr<ModelRegistry::Wait>& hold);
    // The `model` member of a request body when it is a string, else "".
    static std::string model_of(const nlohmann::json& body);
    static std::string model_of(const nlohmann::ordered_json& body);

    // POST /admin/models/{id}/reload (model_reload_request.h): 202 and the model's card; ApiError 403
    // without an admin key, 404 for an unknown id, 400 for a path that is no model.
    SimpleResponse reload(const ReloadRequest& request, const ApiKey* key);
    // SIGHUP: reloads every model from its path (the loaded ones now, the others on next use).
    void reload_all();
    // The gateway whose LoRA adapters the /v1/*_lora_adapter and /lora-adapters routes manage: the
    // one model's (several models: ApiError 400 lora_unsupported: their adapters are given at start). `change`: loading or unloading,
    // which needs an admin key on a server with keys (ApiError 403 admin_key_required).
    Gateway& lora_gateway(const ApiKey* key, bool change);

    // As Gateway's, server-wide.
    const ApiKey* authenticate(std::string_view authorization_header);
    bool auth_required() const;
    bool open_health() const;
    bool open_metrics() const;
    SimpleResponse health() const;
    SimpleResponse liveness() const;
    SimpleResponse readiness() const;
    SimpleResponse models() const;
    SimpleResponse model(const std::string& id) const;
    SimpleResponse metrics();
    SimpleResponse live_state();
    SimpleResponse stored_response(const std::string& id);
    SimpleResponse delete_response(const std::string& id);
    void record_rejection(const ApiKey* key, const std::string& reason);
    std::string new_request_id();

    // Shutdown (Gateway's stages, for every model; a model loading meanwhile gets them too).
    void load();  // one model: loads it (blocking); several: nothing (they load on demand)
    void begin_lame_duck();
    void begin_drain();
    bool draining() const { return draining_; }
    int64_t active_jobs() const;
    void cut_off_remaining();
    void stop_engine();

private:
    class GatewayModel;
    std::vector<std::shared_ptr<Gateway>> gateways() const;  // every model in memory
    nlohmann::json card(const ModelStatus& status) const;
    nlohmann::json adapter_card(const std::string& name, const std::string& base) const;
    std::shared_ptr<Gateway> find_loaded(const std::string& id) const;
    SimpleResponse with_stored_response(const std::string& id, SimpleResponse (Gateway::*answer)(const std::string&));

    Gateway* single_ = nullptr;
    std::shared_ptr<Gateway> single_handle_;  // single_, not owned
    MultiModelOptions options_;
    ApiKeyTable keys_;
    SourceLoader loader_;
    std::unique_ptr<ModelRegistry> registry_;
    std::atomic<bool> lame_duck_{false}, draining_{false};
    std::atomic<int64_t> auth_failures_{0};
    mutable std::mutex rejections_mutex_;
    std::map<std::string, int64_t> rejections_;  // reason -> count, for rejections before a model is known
    RequestIds ids_;
    int64_t started_unix_ = 0;
};

}  // namespace pagoda::server
