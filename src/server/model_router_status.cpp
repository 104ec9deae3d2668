// The router's server-wide answers (model_router.h): /health, /readyz, /v1/models, /metrics and
// the dashboard's /v1/state, each listing every model with its state when there are several.
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/model_router.h"
#include "server/prometheus.h"

namespace pagoda::server {

using json = nlohmann::json;

namespace {

constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

// Several Prometheus texts as one: a family that appears in more than one text (every gateway has
// the same families, its samples labelled model_name) renders once, its samples together, as the
// exposition format requires.
std::string merge_expositions(const std::vector<std::string>& texts) {
    struct Family {
        std::string head;
        std::string samples;
    };
    std::vector<std::string> order;
    std::map<std::string, Family> families;
    for (const std::string& text : texts) {
        std::istringstream in(text);
        std::string line, current;
        while (std::getline(in, line)) {
            if (line.empty()) continue;
            if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
                std::string name = line.substr(7, line.find(' ', 7) - 7);
                if (!families.count(name)) order.push_back(name);
                Family& f = families[name];
                if (f.head.find(line + "\n") == std::string::npos) f.head += line + "\n";
                current = name;
                continue;
            }
            if (line[0] == '#') continue;
            if (!families.count(current)) order.push_back(current);
            families[current].samples += line + "\n";
        }
    }
    std::string out;
    for (const std::string& name : order) out += families[name].head + families[name].samples;
    return out;
}

}  // namespace

json ModelRouter::card(const ModelStatus& s) const {
    json card = {{"id", s.source.id},     {"object", "model"},
                 {"created", started_unix_}, {"owned_by", "pagoda"},
                 {"state", model_state_name(s.state)}, {"memory_bytes", s.memory_bytes},
                 {"version", s.version},  {"waiting", s.waiting}};
    if (!s.source.parent.empty()) card["parent"] = s.source.parent;
    if (!s.source.settings.aliases.empty()) card["aliases"] = s.source.settings.aliases;
    if (s.reloading) card["reloading"] = true;
    if (!s.error.empty()) card["error"] = s.error;
    if (auto g = s.state == ModelState::loaded ? find_loaded(s.source.id) : nullptr) {
        const json own = json::parse(g->model(s.source.id).body);
        for (const char* field : {"max_model_len", "vocab_size"})
            if (own.contains(field)) card[field] = own[field];
    }
    return card;
}

// An adapter's card: its base's state (it loads with the base), `parent` the base.
json ModelRouter::adapter_card(const std::string& name, const std::string& base) const {
    auto s = registry_->status(base);
    return {{"id", name},          {"object", "model"}, {"created", started_unix_}, {"owned_by", "pagoda"},
            {"parent", base},      {"state", s ? model_state_name(s->state) : "unloaded"}};
}

SimpleResponse ModelRouter::models() const {
    if (single_) return single_->models();
    json data = json::array();
    for (const ModelStatus& s : registry_->status()) data.push_back(card(s));
    for (const auto& [name, entry] : adapters()) data.push_back(adapter_card(name, entry.base));
    return {200, "application/json",
            dump_json(json{{"object", "list"}, {"data", data}, {"memory_budget_bytes", registry_->budget_bytes()},
                           {"memory_used_bytes", registry_->used_bytes()}})};
}

SimpleResponse ModelRouter::model(const std::string& id) const {
    if (single_) return single_->model(id);
    if (auto entry = adapter(id)) return {200, "application/json", dump_json(adapter_card(id, entry->base))};
    auto alias = aliases_.find(id);
    auto s = registry_->status(alias != aliases_.end() ? alias->second : id);
    if (!s) {
        std::string known;
        for (const auto& k : registry_->ids()) known += (known.empty() ? "'" : ", '") + k + "'";
        throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves {}", id, known),
                       "invalid_request_error", "model", "model_not_found");
    }
    return {200, "application/json", dump_json(card(*s))};
}

SimpleResponse ModelRouter::health() const {
    if (single_) return single_->health();
    if (lame_duck_) return {503, "application/json", R"({"status":"draining"})"};
    json models = json::object();
    for (const ModelStatus& s : registry_->status()) models[s.source.id] = model_state_name(s.state);
    return {200, "application/json", dump_json(json{{"status", "ok"}, {"models", models}})};
}

SimpleResponse ModelRouter::liveness() const {
    if (single_) return single_->liveness();
    return {200, "application/json", R"({"status":"alive"})"};
}

// Several models: ready while not draining, since any model loads on demand; each model's state
// and queue are listed (a model whose queue is full refuses only its own requests).
SimpleResponse ModelRouter::readiness() const {
    if (single_) return single_->readiness();
    if (lame_duck_) return {503, "application/json", R"({"status":"draining"})"};
    json models = json::object();
    for (const ModelStatus& s : registry_->status()) {
        json m = {{"state", model_state_name(s.state)}, {"waiting", s.waiting}};
        if (auto g = s.state == ModelState::loaded ? find_loaded(s.source.id) : nullptr) {
            const SimpleResponse r = g->readiness();
            m["ready"] = r.status == 200;
            if (r.status != 200) m["status"] = json::parse(r.body).value("status", "");
        }
        models[s.source.id] = m;
    }
    return {200, "application/json", dump_json(json{{"status", "ready"}, {"models", models}})};
}

SimpleResponse ModelRouter::metrics() {
    if (single_) return single_->metrics();
    MetricRegistry r;
    r.add_gauge("pagoda:model_state", "Each model's state: 1 for the state it is in, 0 for the others", {"model", "state"});
    r.add_gauge("pagoda:model_memory_bytes", "Bytes a model takes loaded (weights and KV pool), as the budget counts it",
                {"model"});
    r.add_gauge("pagoda:model_version", "Loads of the model completed (a reload adds one)", {"model"});
    r.add_gauge("pagoda:model_requests_waiting", "Requests held until the model is loaded", {"model"});
    r.add_gauge("pagoda:models_memory_budget_bytes", "The --models-memory budget (0: none)");
    r.add_gauge("pagoda:models_memory_used_bytes", "Bytes counted against the budget: loaded models, the load under way, "
                                                   "and unloaded or replaced versions still finishing requests");
    r.add_gauge("pagoda:models_retired", "Unloaded or replaced model versions still finishing requests");
    r.add_counter("pagoda:router_rejections_total", "Requests refused before reaching a model, by reason", {"reason"});
    r.add_counter("pagoda:router_auth_failures_total", "Requests refused for a missing or unknown API key");
    for (const ModelStatus& s : registry_->status()) {
        for (ModelState st : {ModelState::unloaded, ModelState::loading, ModelState::loaded, ModelState::failed})
            r.set("pagoda:model_state", s.state == st ? 1 : 0, {s.source.id, model_state_name(st)});
        r.set("pagoda:model_memory_bytes", double(s.memory_bytes), {s.source.id});
        r.set("pagoda:model_version", double(s.version), {s.source.id});
        r.set("pagoda:model_requests_waiting", double(s.waiting), {s.source.id});
    }
    r.set("pagoda:models_memory_budget_bytes", double(registry_->budget_bytes()));
    r.set("pagoda:models_memory_used_bytes", double(registry_->used_bytes()));
    r.set("pagoda:models_retired", double(registry_->retired_count()));
    {
        std::lock_guard lock(rejections_mutex_);
        for (const auto& [reason, n] : rejections_) r.set("pagoda:router_rejections_total", double(n), {reason});
    }
    r.set("pagoda:router_auth_failures_total", double(auth_failures_.load()));
    std::vector<std::string> texts = {r.render()};
    // Every model in memory, the current versions first; a retired version's series repeat its
    // model_name, so only the current one of each model is shown.
    std::map<std::string, bool> shown;
    for (auto& g : gateways()) {
        if (shown[g->model_name()]) continue;
        shown[g->model_name()] = true;
        texts.push_back(g->metrics().body);
    }
    return {200, kMetricsType, merge_expositions(texts)};
}

SimpleResponse ModelRouter::live_state() {
    if (single_) return single_->live_state();
    // The dashboard shows one model: the default one when loaded, else the first loaded; every
    // model's state is listed beside it.
    json models = json::array();
    for (const ModelStatus& s : registry_->status()) models.push_back(card(s));
    std::shared_ptr<Gateway> shown = find_loaded(options_.models.front().id);
    for (auto& g : gateways())
        if (!shown && g->state() == Gateway::State::ready) shown = g;
    json state = shown ? json::parse(shown->live_state().body) : json{{"status", "idle"}};
    state["models"] = models;
    return {200, "application/json", dump_json(state)};
}

}  // namespace pagoda::server
