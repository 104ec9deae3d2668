// The models a server may serve, by id, and which of them are in memory. Each entry has a source
// (id, path, parent: the base model of an adapter, empty for a base model) and a state: unloaded,
// loading, loaded or failed. acquire(id) hands out the loaded instance, or starts its load and says
// to wait. Loads run one at a time on the registry's own thread, within a memory budget: before a
// load, idle loaded models (nothing in flight) are unloaded, least recently used first, until the
// new one fits. reload(id) loads a new version beside the current one; once it is loaded, new
// acquires get it while the old instance retires. A retired or evicted instance is freed (on the
// registry's thread) once nothing is in flight on it and nobody else holds it. The registry knows
// nothing of engines or HTTP: a ModelFactory builds instances and says what each costs.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/model_settings.h"

namespace pagoda::server {

struct ModelSource {
    std::string id;
    std::string path;    // a GGUF file or a Hugging Face folder (or whatever the factory reads)
    std::string parent;  // the base model's id when this entry adapts another one; empty: a base model
    ModelSettings settings;  // its own serve settings (models.json), for the factory; the registry ignores them
};

// One loaded model as the registry sees it.
class ServedModel {
public:
    virtual ~ServedModel() = default;
    // API requests still running on it; an instance is unloaded only when this is 0.
    virtual int64_t in_flight() const = 0;
};

// Builds the model (blocking, on the registry's thread); throws on failure (the message is kept).
using ModelFactory = std::function<std::shared_ptr<ServedModel>(const ModelSource& source)>;
// What a model of this source takes in memory once loaded (weights + KV pool), in bytes.
using MemoryEstimate = std::function<int64_t(const ModelSource& source)>;
// The process's resident bytes now (RSS): when given, a load that grows it by more than the
// estimate makes the model counted at that growth from then on.
using MemoryProbe = std::function<int64_t()>;

enum class ModelState { unloaded, loading, loaded, failed };
const char* model_state_name(ModelState state);

// A model's entry as reported (/v1/models, /metrics, readiness).
struct ModelStatus {
    ModelSource source;
    ModelState state = ModelState::unloaded;
    int64_t memory_bytes = 0;   // what the budget counts: the estimate, or its last load's growth if more
    uint64_t version = 0;       // loads completed so far (a reload makes it one more)
    bool reloading = false;     // a new version is loading beside the current one
    std::string error;          // why the last load or reload failed (empty: it did not)
    int64_t waiting = 0;        // requests held until it is loaded
};

class ModelRegistry {
public:
    // budget_bytes: loaded models (and instances waiting to be freed) stay within it; 0: no limit.
    // Every source must fit alone: throws pagoda::Error naming the first that does not.
    ModelRegistry(std::vector<ModelSource> sources, ModelFactory factory, MemoryEstimate estimate, int64_t budget_bytes,
                  MemoryProbe probe = {});
    ~ModelRegistry();  // stops the thread; instances still held elsewhere live until released
    ModelRegistry(const ModelRegistry&) = delete;
    ModelRegistry& operator=(const ModelRegistry&) = delete;

    bool contains(const std::string& id) const;
    std::vector<std::string> ids() const;  // in the order given

    struct Acquired {
        std::shared_ptr<ServedModel> model;  // set when loaded
        ModelState state = ModelState::unloaded;
        std::string error;  // state failed: why (the load is retried by an acquire after retry_after)
    };
    // The loaded instance of `id` (marked used now, for LRU), or its state while it loads: an
    // unloaded model starts loading. A failed model is retried once its failure is older than
    // `failure_hold`. Throws pagoda::Error for an unknown id.
    Acquired acquire(const std::string& id, std::chrono::milliseconds failure_hold = std::chrono::seconds(2));

    // Requests held for a loading model: the count shown in status().waiting. A Wait counts one
    // until destroyed.
    class Wait {
    public:
        ~Wait();
        Wait(const Wait&) = delete;
        Wait& operator=(const Wait&) = delete;

    private:
        friend class ModelRegistry;
        Wait(ModelRegistry& registry, std::string id) : registry_(registry), id_(std::move(id)) {}
        ModelRegistry& registry_;
        std::string id_;
    };
    std::unique_ptr<Wait> wait(const std::string& id);
    int64_t waiting(const std::string& id) const;

    // Loads a new version of `id` beside the current one (from `path` when given, which then stays
    // its path), then switches to it. A model not loaded simply takes the new path and loads on
    // its next acquire. Throws pagoda::Error for an unknown id. Returns false when a reload of it
    // is already under way (this one is merged into it).
    bool reload(const std::string& id, const std::optional<std::string>& path = std::nullopt);
    // Unloads `id` now if it is idle (for tests and admin; returns whether it did).
    bool unload(const std::string& id);

    std::vector<ModelStatus> status() const;
    std::optional<ModelStatus> status(const std::string& id) const;
    int64_t budget_bytes() const { return budget_; }
    // Bytes counted against the budget: loaded and loading models, and retired instances not yet freed.
    int64_t used_bytes() const;
    // Instances unloaded or replaced but still held by requests in flight.
    size_t retired_count() const;
    // Every instance currently in memory (the loaded ones and the retired ones), for shutdown.
    std::vector<std::shared_ptr<ServedModel>> instances() const;

private:
    struct Slot {
        ModelSource source;
        ModelState state = ModelState::unloaded;
        std::shared_ptr<ServedModel> current;
        int64_t memory = 0;
        uint64_t last_used = 0, version = 0;
        std::string error;
        std::chrono::steady_clock::time_point failed_at{};
        std::optional<std::string> reload_path;  // a reload queued or loading (its path)
        bool reload_queued = false;
        int64_t waiting = 0;
    };
    struct Retired {
        std::string id;
        std::shared_ptr<ServedModel> model;
        int64_t memory = 0;
    };
    struct Task {
        std::string id;
        bool reload = false;
    };
    void run();
    void load(const Task& task, std::unique_lock<std::mutex>& lock);
    // Unloads idle models (LRU) until `need` more bytes fit; false when they do not yet.
    bool make_room(const std::string& for_id, int64_t need);
    void reap();  // frees retired instances nobody uses any more (lock held)
    int64_t used_locked() const;
    Slot& slot(const std::string& id);
    const Slot* find(const std::string& id) const;
    ModelStatus status_of(const Slot& s) const;

    ModelFactory factory_;
    MemoryEstimate estimate_;
    MemoryProbe probe_;
    const int64_t budget_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<Slot> slots_;
    std::vector<Retired> retired_;
    std::deque<Task> tasks_;
    int64_t loading_bytes_ = 0;  // the load under way (counted while it runs)
    uint64_t tick_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace pagoda::server
