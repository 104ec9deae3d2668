#include "server/model_router.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace pagoda::server {

using json = nlohmann::json;

// A loaded model in the registry: its gateway, freed (engine stopped) when the registry drops it.
class ModelRouter::GatewayModel : public ServedModel {
public:
    explicit GatewayModel(std::shared_ptr<Gateway> gateway) : gateway(std::move(gateway)) {}
    int64_t in_flight() const override { return gateway->active_jobs(); }
    std::shared_ptr<Gateway> gateway;
};

// The process's resident set (/proc/self/statm's second field, in pages); 0 when unreadable.
static int64_t resident_bytes() {
    std::ifstream in("/proc/self/statm");
    int64_t size = 0, resident = 0;
    if (!(in >> size >> resident)) return 0;
    return resident * int64_t(sysconf(_SC_PAGESIZE));
}

ModelRouter::ModelRouter(Gateway& single) : single_(&single), single_handle_(&single, [](Gateway*) {}) {}

ModelRouter::ModelRouter(MultiModelOptions options, ApiKeyTable keys, SourceLoader loader)
    : options_(std::move(options)), keys_(std::move(keys)), loader_(std::move(loader)) {
    started_unix_ =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    // Each model's gateway is built on the registry's thread when the model loads; a gateway
    // whose load fails is dropped (its error is the registry's).
    auto factory = [this](const ModelSource& source) -> std::shared_ptr<ServedModel> {
        GatewayOptions go = gateway_options(source);
        auto loras = std::make_shared<std::shared_ptr<LoraRegistry>>();  // the loaded model's, kept for its adapters
        auto gateway = std::make_shared<Gateway>(go, keys_, [this, source, loras](engine::EngineOptions eo) {
            LoadedModel loaded = loader_(source, std::move(eo));
            *loras = loaded.loras;
            return loaded;
        });
        if (lame_duck_) gateway->begin_lame_duck();
        if (draining_) gateway->begin_drain();
        gateway->load();
        attach_adapters(gateway, *loras, source.id);
        return std::make_shared<GatewayModel>(std::move(gateway));
    };
    for (const auto& [name, base] : options_.adapter_bases) {
        bool known = false, clash = false;
        for (const auto& m : options_.models) known = known || m.id == base, clash = clash || m.id == name;
        std::string ids;
        for (const auto& m : options_.models) ids += (ids.empty() ? "'" : ", '") + m.id + "'";
        if (!known) fail("--lora {}:{}: no model '{}' is served (the models are {})", base, name, base, ids);
        if (clash) fail("--lora {}:{}: '{}' is already a model's id; name the adapter otherwise", base, name, name);
        adapters_[name] = {base, {}, 1, false};
    }
    // models.json settings: checked now, so a bad combination is a start-up error naming the model.
    for (const auto& m : options_.models) {
        try {
            gateway_options(m).scheduler.validate();
        } catch (const std::exception& e) {
            fail("model '{}': {}", m.id, e.what());
        }
        for (const auto& alias : m.settings.aliases) {
            if (adapters_.count(alias)) fail("the alias '{}' of '{}' is also a LoRA adapter's name", alias, m.id);
            aliases_[alias] = m.id;
        }
    }
    registry_ = std::make_unique<ModelRegistry>(options_.models, factory, options_.estimate, options_.memory_budget,
                                                resident_bytes);
    std::string ids;
    for (const auto& m : options_.models) ids += (ids.empty() ? "" : ", ") + m.id;
    log_info("serve: {} models ({}), each loaded on its first request{}; requests without a model go to '{}'",
             options_.models.size(), ids,
             options_.memory_budget > 0 ? fmt::format(", within {} MiB", options_.memory_budget >> 20) : std::string(),
             options_.models.front().id);
}

ModelRouter::~ModelRouter() = default;

GatewayOptions ModelRouter::gateway_options(const ModelSource& source) const {
    GatewayOptions go = options_.gateway;
    go.model_name = source.id;
    const ModelSettings& s = source.settings;
    if (s.chat_template) go.chat_template = *s.chat_template;
    if (s.reasoning_format) go.reasoning_format = *s.reasoning_format;
    if (s.reasoning_budgets) go.reasoning_budgets = parse_reasoning_budgets(*s.reasoning_budgets);
    if (s.max_seqs) go.scheduler.max_seqs = *s.max_seqs;
    if (s.max_batched_tokens) go.scheduler.max_batched_tokens = *s.max_batched_tokens;
    return go;
}

template <class J>
static J with_id(const J& body, const std::map<std::string, std::string>& aliases) {
    auto it = body.find("model");
    if (it == body.end() || !it->is_string()) return body;
    auto alias = aliases.find(it->template get<std::string>());
    if (alias == aliases.end()) return body;
    J out = body;
    out["model"] = alias->second;
    return out;
}

json ModelRouter::with_model_id(const json& body) const { return with_id(body, aliases_); }
nlohmann::ordered_json ModelRouter::with_model_id(const nlohmann::ordered_json& body) const {
    return with_id(body, aliases_);
}

std::string ModelRouter::model_of(const json& body) {
    auto it = body.find("model");
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string ModelRouter::model_of(const nlohmann::ordered_json& body) {
    auto it = body.find("model");
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

static ApiError model_not_found(const std::string& id, const std::vector<std::string>& ids) {
    std::string known;
    for (const auto& k : ids) known += (known.empty() ? "'" : ", '") + k + "'";
    return ApiError(404, fmt::format("the model '{}' does not exist; this server serves {}", id, known),
                    "invalid_request_error", "model", "model_not_found");
}

std::shared_ptr<Gateway> ModelRouter::route(const std::string& model, std::unique_ptr<ModelRegistry::Wait>& hold) {
    if (!registry_) return single_handle_;
    std::string id = model.empty() ? options_.models.front().id : model;
    if (auto entry = adapter(id)) id = entry->base;
    if (auto alias = aliases_.find(id); alias != aliases_.end()) id = alias->second;
    if (!registry_->contains(id)) {
        hold.reset();
        record_rejection(nullptr, "invalid");
        throw model_not_found(id, registry_->ids());
    }
    if (draining_) {
        hold.reset();
        ApiError e = ApiError::unavailable("the server is shutting down; retry (another instance will answer)",
                                           "shutting_down");
        e.retry_after = 1;
        record_rejection(nullptr, "draining");
        throw e;
    }
    ModelRegistry::Acquired got = registry_->acquire(id);
    if (got.model) {
        hold.reset();
        return static_cast<GatewayModel&>(*got.model).gateway;
    }
    if (got.state == ModelState::failed) {
        hold.reset();
        record_rejection(nullptr, "failed");
        throw ApiError::unavailable(fmt::format("the model '{}' failed to load: {}", id, got.error), "model_failed");
    }
    if (!hold) {
        // A new request joins the queue of a model that is loading (the gateway's own queue rule
        // applies once it is loaded).
        if (registry_->waiting(id) >= options_.gateway.max_queue) {
            ApiError e = ApiError::unavailable(
                fmt::format("the model '{}' is loading and {} requests already wait for it", id, registry_->waiting(id)),
                "queue_full");
            e.retry_after = 1;
            record_rejection(nullptr, "queue_full");
            throw e;
        }
        hold = registry_->wait(id);
    }
    return nullptr;
}

std::vector<std::shared_ptr<Gateway>> ModelRouter::gateways() const {
    if (!registry_) return {single_handle_};
    std::vector<std::shared_ptr<Gateway>> out;
    for (const auto& m : registry_->instances()) out.push_back(static_cast<const GatewayModel&>(*m).gateway);
    return out;
}

std::shared_ptr<Gateway> ModelRouter::find_loaded(const std::string& id) const {
    for (auto& g : gateways())
        if (g->model_name() == id && g->state() == Gateway::State::ready) return g;
    return nullptr;
}

SimpleResponse ModelRouter::reload(const ReloadRequest& request, const ApiKey* key) {
    const std::string& id = request.id;
    const std::optional<std::string>& path = request.path;
    if (!keys_.empty() && !(key && key->admin))
        throw ApiError(403, "reloading a model needs an admin key (admin=true in --api-key-file, or --admin-key)",
                       "permission_error", {}, "admin_key_required");
    if (keys_.empty())
        throw ApiError(403, "the /admin endpoints need an admin key: start the server with --admin-key or a key with "
                            "admin=true in --api-key-file",
                       "permission_error", {}, "admin_key_required");
    if (!registry_)
        throw ApiError(400, "a server of one model reloads by a restart or a rolling update; serve several models "
                            "(-m A -m B, --models-dir) to reload in place",
                       "invalid_request_error", {}, "reload_unsupported");
    if (!registry_->contains(id)) throw model_not_found(id, registry_->ids());
    if (path && !std::filesystem::is_regular_file(*path) && !std::filesystem::is_directory(*path))
        throw ApiError::invalid(fmt::format("the path '{}' is neither a GGUF file nor a Hugging Face model folder", *path),
                                "path", "invalid_path");
    registry_->reload(id, path);
    log_info("serve: reload of model '{}' requested{}", id, path ? " from " + *path : std::string());
    return {202, "application/json", dump_json(card(*registry_->status(id)))};
}

void ModelRouter::reload_all() {
    if (!registry_) {
        log_info("serve: SIGHUP ignored: a server of one model reloads by a restart");
        return;
    }
    log_info("serve: SIGHUP: reloading every model from its path");
    for (const auto& id : registry_->ids()) registry_->reload(id);
}

const ApiKey* ModelRouter::authenticate(std::string_view header) {
    if (single_) return single_->authenticate(header);
    if (keys_.empty()) return nullptr;
    const ApiKey* key = keys_.find(bearer_token(header));
    if (!key) {
        ++auth_failures_;
        if (header.empty())
            throw ApiError::unauthorized("missing API key: send 'Authorization: Bearer YOUR_KEY' (or 'x-api-key: YOUR_KEY')");
        throw ApiError::unauthorized("incorrect API key provided");
    }
    return key;
}

bool ModelRouter::auth_required() const { return single_ ? single_->auth_required() : !keys_.empty(); }
bool ModelRouter::open_health() const { return single_ ? single_->open_health() : options_.gateway.open_health; }
bool ModelRouter::open_metrics() const { return single_ ? single_->open_metrics() : options_.gateway.open_metrics; }

void ModelRouter::record_rejection(const ApiKey* key, const std::string& reason) {
    if (single_) return single_->record_rejection(key, reason);
    std::lock_guard lock(rejections_mutex_);
    rejections_[reason]++;
}

std::string ModelRouter::new_request_id() {
    return single_ ? single_->new_request_id() : ids_.next();
}

// A stored response lives with the model that made it: the first gateway that has it answers.
SimpleResponse ModelRouter::with_stored_response(const std::string& id,
                                                 SimpleResponse (Gateway::*answer)(const std::string&)) {
    if (single_) return (single_->*answer)(id);
    for (auto& g : gateways()) {
        try {
            return (*g.*answer)(id);
        } catch (const ApiError& e) {
            if (e.status != 404) throw;
        }
    }
    throw ApiError(404, fmt::format("no stored response '{}'", id), "invalid_request_error", {}, "not_found");
}

SimpleResponse ModelRouter::stored_response(const std::string& id) {
    return with_stored_response(id, &Gateway::stored_response);
}

SimpleResponse ModelRouter::delete_response(const std::string& id) {
    return with_stored_response(id, &Gateway::delete_response);
}

void ModelRouter::load() {
    if (single_) single_->load();
}

void ModelRouter::begin_lame_duck() {
    lame_duck_ = true;
    for (auto& g : gateways()) g->begin_lame_duck();
}

void ModelRouter::begin_drain() {
    lame_duck_ = true, draining_ = true;
    for (auto& g : gateways()) g->begin_drain();
}

int64_t ModelRouter::active_jobs() const {
    int64_t n = 0;
    for (auto& g : gateways()) n += g->active_jobs();
    return n;
}

void ModelRouter::cut_off_remaining() {
    for (auto& g : gateways()) g->cut_off_remaining();
}

void ModelRouter::stop_engine() {
    for (auto& g : gateways()) g->stop_engine();
}

}  // namespace pagoda::server
