#include "server/lora_registry.h"

#include <fmt/format.h>

#include "core/error.h"
#include "server/api_error.h"

namespace pagoda::server {

LoraRegistry::LoraRegistry(Loader loader, size_t max_resident, bool allow_runtime)
    : loader_(std::move(loader)), max_resident_(max_resident), allow_runtime_(allow_runtime && loader_) {}

bool LoraRegistry::empty() const {
    std::lock_guard lock(mutex_);
    return entries_.empty();
}

LoraRegistry::Entry* LoraRegistry::find_locked(const std::string& name) {
    for (auto& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

void LoraRegistry::add(std::shared_ptr<const lora::Adapter> adapter) {
    std::lock_guard lock(mutex_);
    if (find_locked(adapter->name)) fail("two LoRA adapters are named '{}'", adapter->name);
    entries_.push_back({next_id_++, adapter->name, adapter->path, adapter->scale, adapter, ++clock_});
    evict_locked(&entries_.back());
}

void LoraRegistry::load(const std::string& name, const std::string& path, float scale) {
    if (!allow_runtime_) throw ApiError(400, "run-time LoRA loading is off; start the server with --allow-runtime-lora",
                                 "invalid_request_error", "lora_name", "unsupported");
    if (name.empty()) throw ApiError::invalid("'lora_name' must not be empty", "lora_name", "invalid_value");
    {
        std::lock_guard lock(mutex_);
        if (find_locked(name))
            throw ApiError::invalid(fmt::format("a LoRA adapter named '{}' is already loaded", name), "lora_name",
                                    "invalid_value");
    }
    std::shared_ptr<const lora::Adapter> adapter;
    try {
        adapter = loader_(path, name, scale);  // outside the lock: reading takes a while
    } catch (const Error& e) {
        throw ApiError::invalid(fmt::format("LoRA adapter '{}' could not be loaded: {}", name, e.what()), "lora_path",
                                "invalid_value");
    }
    std::lock_guard lock(mutex_);
    if (find_locked(name))
        throw ApiError::invalid(fmt::format("a LoRA adapter named '{}' is already loaded", name), "lora_name",
                                "invalid_value");
    entries_.push_back({next_id_++, name, path, scale, std::move(adapter), ++clock_});
    evict_locked(&entries_.back());
}

void LoraRegistry::unload(const std::string& name) {
    if (!allow_runtime_) throw ApiError(400, "run-time LoRA unloading is off; start the server with --allow-runtime-lora",
                                 "invalid_request_error", "lora_name", "unsupported");
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->name == name) {
            entries_.erase(it);  // requests running under it keep their reference until they finish
            return;
        }
    throw ApiError(404, fmt::format("no LoRA adapter named '{}' is loaded", name), "invalid_request_error", "lora_name",
                   "model_not_found");
}

bool LoraRegistry::has(const std::string& model) const {
    std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
        if (e.name == model) return true;
    return false;
}

std::shared_ptr<const lora::Adapter> LoraRegistry::use_locked(Entry& e) {
    e.last_used = ++clock_;
    if (!e.adapter) {
        if (!loader_) fail("LoRA adapter '{}' is not in memory and cannot be read again", e.name);
        try {
            e.adapter = loader_(e.path, e.name, e.scale);
        } catch (const Error& err) {
            throw ApiError(500, fmt::format("LoRA adapter '{}' could not be read again from {}: {}", e.name, e.path, err.what()),
                           "server_error", "model", "lora_reload_failed");
        }
    }
    auto held = e.adapter;
    evict_locked(&e);
    return held;
}

void LoraRegistry::evict_locked(const Entry* keep) {
    if (max_resident_ == 0 || !loader_) return;  // start-up adapters without a loader are never dropped
    for (;;) {
        size_t n = 0;
        Entry* oldest = nullptr;
        for (auto& e : entries_) {
            if (!e.adapter) continue;
            ++n;
            // Idle: only the registry holds it (no request in flight runs under it).
            if (&e != keep && e.adapter.use_count() == 1 && (!oldest || e.last_used < oldest->last_used)) oldest = &e;
        }
        if (n <= max_resident_ || !oldest) return;
        oldest->adapter.reset();
    }
}

lora::AdapterRef LoraRegistry::resolve(const std::string& model, const std::vector<LoraChoice>& choices) {
    std::lock_guard lock(mutex_);
    lora::AdapterRef ref;
    if (Entry* e = model.empty() ? nullptr : find_locked(model)) ref = {use_locked(*e), e->scale};
    const LoraChoice* chosen = nullptr;
    for (size_t i = 0; i < choices.size(); ++i) {
        const LoraChoice& c = choices[i];
        if (c.scale == 0) continue;
        if (chosen)
            throw ApiError::invalid("'lora' gives two adapters non-zero scales; a request runs under one adapter here",
                                    fmt::format("lora[{}]", i), "invalid_value");
        chosen = &c;
    }
    if (!chosen) return ref;
    if (ref)
        throw ApiError::invalid(fmt::format("'model' names the adapter '{}' and 'lora' another; give one", model), "lora",
                                "invalid_value");
    Entry* e = nullptr;
    for (auto& entry : entries_)
        if ((chosen->id >= 0 && entry.id == chosen->id) || (!chosen->path.empty() && entry.path == chosen->path)) e = &entry;
    if (!e)
        throw ApiError(404,
                       chosen->id >= 0 ? fmt::format("no LoRA adapter has id {}", chosen->id)
                                       : fmt::format("no LoRA adapter was loaded from '{}'", chosen->path),
                       "invalid_request_error", "lora", "model_not_found");
    return {use_locked(*e), float(chosen->scale)};
}

nlohmann::json LoraRegistry::model_cards(const std::string& base, int64_t created) const {
    std::lock_guard lock(mutex_);
    nlohmann::json cards = nlohmann::json::array();
    for (const auto& e : entries_)
        cards.push_back({{"id", e.name}, {"object", "model"}, {"created", created}, {"owned_by", "pagoda"},
                         {"parent", base}, {"root", e.path}, {"lora_id", e.id}, {"loaded", e.adapter != nullptr}});
    return cards;
}

nlohmann::json LoraRegistry::adapter_list() const {
    std::lock_guard lock(mutex_);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : entries_) list.push_back({{"id", e.id}, {"name", e.name}, {"path", e.path}, {"scale", e.scale}});
    return list;
}

size_t LoraRegistry::resident() const {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& e : entries_) n += e.adapter != nullptr;
    return n;
}

size_t LoraRegistry::max_active() const {
    std::lock_guard lock(mutex_);
    return max_resident_ > 0 ? max_resident_ : entries_.size();
}

}  // namespace pagoda::server
