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
// LoRA adapters on several models belong to one base each (--lora MODEL:NAME=PATH, or a run-time
// load naming its `base`, model_router_lora.cpp): a request naming one goes to its base (loading it
// as any request would), /v1/models lists it with `parent`, and every new instance of the base (a
// load on demand, a reload) loads the base's adapters with it.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
    // --allow-runtime-lora: POST /v1/load_lora_adapter {"base": ID, ...} adds an adapter to a base.
    bool allow_runtime_lora = false;
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
    // The body as the model's gateway takes it: a `model` that is an alias (models.json "aliases")
    // replaced by the model's id (so the response names the id, as OpenAI's do for an alias).
    nlohmann::json with_model_id(const nlohmann::json& body) const;
    nlohmann::ordered_json with_model_id(const nlohmann::ordered_json& body) const;

    // POST /admin/models/{id}/reload (model_reload_request.h): 202 and the model's card; ApiError 403
    // without an admin key, 404 for an unknown id, 400 for a path that is no model.
    SimpleResponse reload(const ReloadRequest& request, const ApiKey* key);
    // SIGHUP: reloads every model from its path (the loaded ones now, the others on next use).
    void reload_all();
    // vLLM's POST /v1/load_lora_adapter and /v1/unload_lora_adapter, llama-server's GET /lora-adapters
    // (model_router_lora.cpp). Loading names its `base` (required with several models; with one it
    // may only name that model); with keys, loading and unloading need an admin key (403
    // admin_key_required). A base in memory loads the adapter now (400 naming adapter and base when
    // its shapes do not fit); a base not in memory loads it with its next load.
    SimpleResponse load_lora_adapter(const nlohmann::json& body, const ApiKey* key);
    SimpleResponse unload_lora_adapter(const nlohmann::json& body, const ApiKey* key);
    SimpleResponse lora_adapters() const;

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
    // A model's gateway options: the server-wide ones with its models.json settings applied.
    GatewayOptions gateway_options(const ModelSource& source) const;
    nlohmann::json adapter_card(const std::string& name, const std::string& base) const;
    std::shared_ptr<Gateway> find_loaded(const std::string& id) const;
    // An adapter's entry: its base, and for a run-time one its path and scale (start-up adapters
    // are loaded by the base's loader).
    struct AdapterEntry {
        std::string base, path;
        float scale = 1;
        bool runtime = false;
    };
    std::optional<AdapterEntry> adapter(const std::string& name) const;
    std::map<std::string, AdapterEntry> adapters() const;
    void require_admin(const ApiKey* key) const;
    // A new instance of `base` (loaded, not yet serving): loads the base's run-time adapters into
    // it; throws pagoda::Error naming the adapter and base when one does not fit.
    void attach_adapters(const std::shared_ptr<Gateway>& gateway, const std::shared_ptr<LoraRegistry>& loras,
                         const std::string& base);
    // An instance in memory and its adapters (the gateway's own registry, which lives as long as it).
    struct Instance {
        std::shared_ptr<Gateway> gateway;
        std::shared_ptr<LoraRegistry> loras;
    };
    // The instances of `base` in memory that are ready (lora_ops_mutex_ held).
    std::vector<Instance> instances_of(const std::string& base);
    std::shared_ptr<LoraRegistry> loras_of_loaded(const std::string& base) const;
    SimpleResponse with_stored_response(const std::string& id, SimpleResponse (Gateway::*answer)(const std::string&));

    Gateway* single_ = nullptr;
    std::shared_ptr<Gateway> single_handle_;  // single_, not owned
    MultiModelOptions options_;
    ApiKeyTable keys_;
    SourceLoader loader_;
    std::unique_ptr<ModelRegistry> registry_;
    std::map<std::string, std::string> aliases_;  // models.json alias -> model id
    mutable std::mutex adapters_mutex_;
    std::map<std::string, AdapterEntry> adapters_;  // adapter name -> entry (adapters_mutex_)
    // One adapter load or unload at a time, and a new instance's adapter pass: so an adapter loaded
    // while its base loads reaches the new instance either way.
    mutable std::mutex lora_ops_mutex_;
    struct Built {
        std::weak_ptr<Gateway> gateway;
        std::weak_ptr<LoraRegistry> loras;
    };
    std::vector<Built> built_;  // every instance built (lora_ops_mutex_)
    std::atomic<bool> lame_duck_{false}, draining_{false};
    std::atomic<int64_t> auth_failures_{0};
    mutable std::mutex rejections_mutex_;
    std::map<std::string, int64_t> rejections_;  // reason -> count, for rejections before a model is known
    RequestIds ids_;
    int64_t started_unix_ = 0;
};

}  // namespace pagoda::server
