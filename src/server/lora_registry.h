// The LoRA adapters a server serves on its base model. Each has a name (a model id in /v1/models,
// `parent` the base), a stable numeric id (llama-server's `lora: [{"id", "scale"}]`), its path and
// default scale. A request picks one by `model` or by the `lora` field; the registry returns the
// AdapterRef its engine requests carry. With a loader (StepModel::load_lora), adapters may also be
// loaded and unloaded at run time (POST /v1/load_lora_adapter, /v1/unload_lora_adapter), and at most
// max_resident are kept in memory: past that, the least recently used adapter no request holds is
// dropped, and a later request for it reads it again from its path. Thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lora/adapter.h"
#include "server/openai_request.h"

namespace pagoda::server {


class LoraRegistry {
public:
    using Loader = std::function<std::shared_ptr<const lora::Adapter>(const std::string& path, const std::string& name,
                                                                       float scale)>;
    // max_resident 0: no cap (evicted adapters are read again with `loader`, so a cap needs one);
    // allow_runtime: load() and unload() work (--allow-runtime-lora), else they are refused.
    explicit LoraRegistry(Loader loader = {}, size_t max_resident = 0, bool allow_runtime = false);

    bool empty() const;
    bool allows_runtime() const { return allow_runtime_; }
    // A start-up adapter (--lora), already loaded; refused (pagoda::Error) when the name is taken.
    void add(std::shared_ptr<const lora::Adapter> adapter);
    // Run-time load (reads the file now) and unload. Throw ApiError: 400 for a name in use or a bad
    // file (its error named), 404 for an unknown name.
    void load(const std::string& name, const std::string& path, float scale = 1);
    void unload(const std::string& name);

    // Whether `model` names an adapter.
    bool has(const std::string& model) const;
    // The adapter a request runs under: `model` when it names an adapter, then the `lora` field
    // (llama-server's semantics: listed adapters at their scales, unlisted ones at 0; at most one may
    // have a non-zero scale here). Reloads an evicted adapter. Throws ApiError (400 / 404).
    lora::AdapterRef resolve(const std::string& model, const std::vector<LoraChoice>& choices);

    // /v1/models cards of the adapters (parent: `base`), and llama-server's GET /lora-adapters list.
    nlohmann::json model_cards(const std::string& base, int64_t created) const;
    nlohmann::json adapter_list() const;
    size_t resident() const;  // adapters in memory now
    // How many adapters the engine may hold at once (vllm:lora_requests_info's max_lora): the cap, or
    // without one every adapter the registry knows (all stay in memory, none waits for room).
    size_t max_active() const;

private:
    struct Entry {
        int64_t id;
        std::string name, path;
        float scale;
        std::shared_ptr<const lora::Adapter> adapter;  // null: evicted, read again on use
        uint64_t last_used;
    };
    Entry* find_locked(const std::string& name);
    std::shared_ptr<const lora::Adapter> use_locked(Entry& e);  // loads if evicted, marks used, evicts others
    void evict_locked(const Entry* keep);

    Loader loader_;
    size_t max_resident_;
    bool allow_runtime_;
    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
    int64_t next_id_ = 0;
    uint64_t clock_ = 0;
};

}  // namespace pagoda::server
