// The router's LoRA endpoints (model_router.h): vLLM's POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter, llama-server's GET /lora-adapters. With one model they check `base` and
// hand the rest to its gateway (gateway_lora.cpp). With several, the router keeps which base each
// adapter belongs to: a run-time adapter loads into every instance of its base in memory now, and
// into each new one (a load on demand, a reload) before it serves, so it lives as long as its entry.
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/model_router.h"

namespace pagoda::server {

using json = nlohmann::json;
namespace jr = json_reader;

namespace {

// The body as an object whose members are all in `allowed`; the refusal names the first other one.
void check_fields(const json& body, std::initializer_list<const char*> allowed) {
    try {
        jr::read_object(body, "body");
    } catch (const jr::JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
    for (auto it = body.begin(); it != body.end(); ++it) {
        bool known = false;
        for (const char* a : allowed) known = known || it.key() == a;
        if (!known)
            throw ApiError::invalid(
                fmt::format("'{}' is not a field of this endpoint; it is refused rather than ignored", it.key()), it.key(),
                "unsupported_parameter");
    }
}

// The string member `name` ("" when absent and not required).
std::string string_of(const json& body, const char* name, bool required) {
    try {
        const json* v = jr::field(body, name);
        if (!v && !required) return {};
        return jr::read_string(v ? *v : jr::required(body, name, name), name);
    } catch (const jr::JsonFieldError& e) {
        throw ApiError::from_field(e);
    }
}

std::string quoted_list(const std::vector<std::string>& ids) {
    std::string out;
    for (const auto& id : ids) out += (out.empty() ? "'" : ", '") + id + "'";
    return out;
}

ApiError runtime_off(const char* what) {
    return ApiError(400, fmt::format("run-time LoRA {} is off; start the server with --allow-runtime-lora", what),
                    "invalid_request_error", {}, "unsupported");
}

// On a server of one model `base` may only name that model; the rest of the body goes to its gateway.
json without_base(const json& body, const std::string& base, const std::string& model_name) {
    if (jr::field(body, "base") && base != model_name)
        throw ApiError(404, fmt::format("'base' names the model '{}', but this server serves '{}'", base, model_name),
                       "invalid_request_error", "base", "model_not_found");
    json rest = body;
    rest.erase("base");
    return rest;
}

}  // namespace

std::optional<ModelRouter::AdapterEntry> ModelRouter::adapter(const std::string& name) const {
    std::lock_guard lock(adapters_mutex_);
    auto it = adapters_.find(name);
    if (it == adapters_.end()) return std::nullopt;
    return it->second;
}

std::map<std::string, ModelRouter::AdapterEntry> ModelRouter::adapters() const {
    std::lock_guard lock(adapters_mutex_);
    return adapters_;
}

void ModelRouter::require_admin(const ApiKey* key) const {
    if (auth_required() && !(key && key->admin))
        throw ApiError(403, "loading and unloading LoRA adapters needs an admin key (admin=true in --api-key-file, or "
                            "--admin-key)",
                       "permission_error", {}, "admin_key_required");
}

std::vector<ModelRouter::Instance> ModelRouter::instances_of(const std::string& base) {
    std::vector<Instance> out;
    std::erase_if(built_, [](const Built& b) { return b.gateway.expired(); });
    for (const auto& b : built_) {
        auto g = b.gateway.lock();
        auto loras = b.loras.lock();
        if (g && loras && g->model_name() == base && g->state() == Gateway::State::ready)
            out.push_back({std::move(g), std::move(loras)});
    }
    return out;
}

std::shared_ptr<LoraRegistry> ModelRouter::loras_of_loaded(const std::string& base) const {
    std::lock_guard ops(lora_ops_mutex_);
    auto current = find_loaded(base);
    for (const auto& b : built_)
        if (current && b.gateway.lock() == current) return b.loras.lock();
    return nullptr;
}

void ModelRouter::attach_adapters(const std::shared_ptr<Gateway>& gateway, const std::shared_ptr<LoraRegistry>& loras,
                                  const std::string& base) {
    std::lock_guard ops(lora_ops_mutex_);
    std::erase_if(built_, [](const Built& b) { return b.gateway.expired(); });
    built_.push_back({gateway, loras});  // from here on a run-time load reaches it too
    for (const auto& [name, entry] : adapters()) {
        if (!entry.runtime || entry.base != base) continue;
        if (!loras) fail("the LoRA adapter '{}' cannot be served: the base model '{}' has no adapter support", name, base);
        try {
            loras->load(name, entry.path, entry.scale);
        } catch (const ApiError& e) {
            fail("the LoRA adapter '{}' ({}, loaded at run time) does not fit the base model '{}': {} (unload it with "
                 "POST /v1/unload_lora_adapter)",
                 name, entry.path, base, e.what());
        }
    }
}

SimpleResponse ModelRouter::load_lora_adapter(const json& body, const ApiKey* key) {
    require_admin(key);
    check_fields(body, {"lora_name", "lora_path", "base"});
    const std::string base = string_of(body, "base", false);
    if (!registry_) {
        return single_->load_lora_adapter(without_base(body, base, single_->model_name()));
    }
    const std::string name = string_of(body, "lora_name", true);
    const std::string path = string_of(body, "lora_path", true);
    if (!options_.allow_runtime_lora) throw runtime_off("loading");
    if (!jr::field(body, "base"))
        throw ApiError::invalid(fmt::format("'base' is required: this server serves several models; name the one the "
                                            "adapter belongs to ({})",
                                            quoted_list(registry_->ids())),
                                "base", "missing_required_parameter");
    if (!registry_->contains(base))
        throw ApiError(404, fmt::format("'base' names the model '{}', which this server does not serve; it serves {}",
                                        base, quoted_list(registry_->ids())),
                       "invalid_request_error", "base", "model_not_found");
    if (name.empty()) throw ApiError::invalid("'lora_name' must not be empty", "lora_name", "invalid_value");
    if (registry_->contains(name) || aliases_.count(name))
        throw ApiError::invalid(fmt::format("'{}' is a base model's id; name the adapter otherwise", name), "lora_name",
                                "invalid_value");
    if (!std::filesystem::is_regular_file(path) && !std::filesystem::is_directory(path))
        throw ApiError::invalid(fmt::format("LoRA adapter '{}': no file or folder at '{}'", name, path), "lora_path",
                                "invalid_value");
    std::lock_guard ops(lora_ops_mutex_);
    if (auto taken = adapter(name))
        throw ApiError::invalid(fmt::format("a LoRA adapter named '{}' is already loaded (on '{}')", name, taken->base),
                                "lora_name", "invalid_value");
    // Every instance of the base in memory takes it now (its shapes checked), or none does.
    std::vector<Instance> done;
    for (auto& g : instances_of(base)) {
        try {
            g.loras->load(name, path);
        } catch (const ApiError& e) {
            for (auto& d : done) d.loras->unload(name);
            throw ApiError(e.status, fmt::format("{} (base model '{}')", e.what(), base), e.type, e.param, e.code);
        }
        done.push_back(std::move(g));
    }
    {
        std::lock_guard lock(adapters_mutex_);
        adapters_[name] = {base, path, 1, true};
    }
    log_info("serve: LoRA adapter '{}' ({}) added to '{}'{}", name, path, base,
             done.empty() ? " (loaded with it on its next load)" : "");
    return {200, "text/plain; charset=utf-8",
            done.empty() ? fmt::format("Success: LoRA adapter '{}' added; it loads with its base model '{}'.", name, base)
                         : fmt::format("Success: LoRA adapter '{}' added successfully.", name)};
}

SimpleResponse ModelRouter::unload_lora_adapter(const json& body, const ApiKey* key) {
    require_admin(key);
    check_fields(body, {"lora_name", "lora_int_id", "base"});
    const std::string base = string_of(body, "base", false);
    const std::string name = string_of(body, "lora_name", true);
    if (!registry_) {
        return single_->unload_lora_adapter(without_base(body, base, single_->model_name()));
    }
    if (!options_.allow_runtime_lora) throw runtime_off("unloading");
    std::lock_guard ops(lora_ops_mutex_);
    auto entry = adapter(name);
    if (!entry)
        throw ApiError(404, fmt::format("no LoRA adapter named '{}' is loaded", name), "invalid_request_error",
                       "lora_name", "model_not_found");
    if (jr::field(body, "base") && base != entry->base)
        throw ApiError::invalid(fmt::format("the LoRA adapter '{}' belongs to '{}', not '{}'", name, entry->base, base),
                                "base", "invalid_value");
    if (!entry->runtime)
        throw ApiError::invalid(fmt::format("the LoRA adapter '{}' was given at start (--lora {}:{}=...); it stays until "
                                            "a restart without it",
                                            name, entry->base, name),
                                "lora_name", "invalid_value");
    {
        std::lock_guard lock(adapters_mutex_);
        adapters_.erase(name);  // new requests naming it get 404 from here on
    }
    // Requests running under it keep their reference and finish.
    for (auto& g : instances_of(entry->base)) {
        try {
            g.loras->unload(name);
        } catch (const ApiError&) {
            // That instance never had it (a load that failed on it): nothing to remove.
        }
    }
    log_info("serve: LoRA adapter '{}' removed from '{}'", name, entry->base);
    return {200, "text/plain; charset=utf-8", fmt::format("Success: LoRA adapter '{}' removed successfully.", name)};
}

SimpleResponse ModelRouter::lora_adapters() const {
    if (!registry_) return single_->lora_adapters();
    json list = json::array();
    for (const auto& [name, entry] : adapters()) {
        json item = {{"name", name}, {"base", entry.base}, {"runtime", entry.runtime}};
        if (entry.runtime) item["path"] = entry.path, item["scale"] = entry.scale;
        // While its base is in memory: the id a request's `lora` field names it by, on that base.
        if (auto loras = loras_of_loaded(entry.base))
            for (const auto& a : loras->adapter_list())
                if (a["name"] == name) item["id"] = a["id"], item["path"] = a["path"], item["scale"] = a["scale"];
        item["loaded"] = item.contains("id");
        list.push_back(std::move(item));
    }
    return {200, "application/json", dump_json(list)};
}

}  // namespace pagoda::server
