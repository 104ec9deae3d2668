#include "server/model_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace pagoda::server {

const char* model_state_name(ModelState state) {
    switch (state) {
        case ModelState::unloaded: return "unloaded";
        case ModelState::loading: return "loading";
        case ModelState::loaded: return "loaded";
        case ModelState::failed: return "failed";
    }
    return "unknown";
}

ModelRegistry::ModelRegistry(std::vector<ModelSource> sources, ModelFactory factory, MemoryEstimate estimate,
                             int64_t budget_bytes, MemoryProbe probe)
    : factory_(std::move(factory)), estimate_(std::move(estimate)), probe_(std::move(probe)), budget_(budget_bytes) {
    if (sources.empty()) fail("no models to serve");
    for (auto& source : sources) {
        if (find(source.id)) fail("two models have the id '{}'", source.id);
        Slot s;
        s.memory = estimate_(source);
        if (budget_ > 0 && s.memory > budget_)
            fail("the model '{}' needs about {} MiB, more than the whole --models-memory budget of {} MiB", source.id,
                 s.memory >> 20, budget_ >> 20);
        s.source = std::move(source);
        slots_.push_back(std::move(s));
    }
    thread_ = std::thread([this] { run(); });
}

ModelRegistry::~ModelRegistry() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

const ModelRegistry::Slot* ModelRegistry::find(const std::string& id) const {
    for (const Slot& s : slots_)
        if (s.source.id == id) return &s;
    return nullptr;
}

ModelRegistry::Slot& ModelRegistry::slot(const std::string& id) {
    for (Slot& s : slots_)
        if (s.source.id == id) return s;
    fail("the model '{}' does not exist", id);
}

bool ModelRegistry::contains(const std::string& id) const {
    std::lock_guard lock(mutex_);
    return find(id) != nullptr;
}

std::vector<std::string> ModelRegistry::ids() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const Slot& s : slots_) out.push_back(s.source.id);
    return out;
}

ModelRegistry::Acquired ModelRegistry::acquire(const std::string& id, std::chrono::milliseconds failure_hold) {
    std::lock_guard lock(mutex_);
    Slot& s = slot(id);
    s.last_used = ++tick_;
    if (s.state == ModelState::loaded) return {s.current, s.state, {}};
    if (s.state == ModelState::failed && std::chrono::steady_clock::now() - s.failed_at < failure_hold)
        return {nullptr, s.state, s.error};
    if (s.state != ModelState::loading) {
        s.state = ModelState::loading;
        tasks_.push_back({id, false});
        wake_.notify_all();
    }
    return {nullptr, ModelState::loading, {}};
}

ModelRegistry::Wait::~Wait() {
    std::lock_guard lock(registry_.mutex_);
    registry_.slot(id_).waiting--;
}

std::unique_ptr<ModelRegistry::Wait> ModelRegistry::wait(const std::string& id) {
    std::lock_guard lock(mutex_);
    slot(id).waiting++;
    return std::unique_ptr<Wait>(new Wait(*this, id));
}

int64_t ModelRegistry::waiting(const std::string& id) const {
    std::lock_guard lock(mutex_);
    const Slot* s = find(id);
    return s ? s->waiting : 0;
}

bool ModelRegistry::reload(const std::string& id, const std::optional<std::string>& path) {
    std::lock_guard lock(mutex_);
    Slot& s = slot(id);
    if (s.state != ModelState::loaded) {
        // Nothing to swap: the next load reads the new path. A load under way finishes with the
        // old path, so queue a reload behind it.
        if (path) s.source.path = *path, s.memory = estimate_(s.source);
        if (s.state != ModelState::loading) {
            if (s.state == ModelState::failed) s.state = ModelState::unloaded, s.error.clear();
            return true;
        }
    }
    const bool merged = s.reload_queued;
    s.reload_path = path ? *path : (s.reload_path ? *s.reload_path : s.source.path);
    if (!merged) {
        s.reload_queued = true;
        tasks_.push_back({id, true});
        wake_.notify_all();
    }
    return !merged;
}

bool ModelRegistry::unload(const std::string& id) {
    std::lock_guard lock(mutex_);
    Slot& s = slot(id);
    if (s.state != ModelState::loaded || s.current->in_flight() > 0) return false;
    retired_.push_back({id, std::move(s.current), s.memory});
    s.current.reset();
    s.state = ModelState::unloaded;
    reap();
    return true;
}

int64_t ModelRegistry::used_locked() const {
    int64_t used = loading_bytes_;
    for (const Slot& s : slots_)
        if (s.state == ModelState::loaded) used += s.memory;
    for (const Retired& r : retired_) used += r.memory;
    return used;
}

int64_t ModelRegistry::used_bytes() const {
    std::lock_guard lock(mutex_);
    return used_locked();
}

size_t ModelRegistry::retired_count() const {
    std::lock_guard lock(mutex_);
    return retired_.size();
}

std::vector<std::shared_ptr<ServedModel>> ModelRegistry::instances() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<ServedModel>> out;
    for (const Slot& s : slots_)
        if (s.current) out.push_back(s.current);
    for (const Retired& r : retired_) out.push_back(r.model);
    return out;
}

ModelStatus ModelRegistry::status_of(const Slot& s) const {
    return {s.source, s.state, s.memory, s.version, s.reload_queued, s.error, s.waiting};
}

std::vector<ModelStatus> ModelRegistry::status() const {
    std::lock_guard lock(mutex_);
    std::vector<ModelStatus> out;
    for (const Slot& s : slots_) out.push_back(status_of(s));
    return out;
}

std::optional<ModelStatus> ModelRegistry::status(const std::string& id) const {
    std::lock_guard lock(mutex_);
    const Slot* s = find(id);
    if (!s) return std::nullopt;
    return status_of(*s);
}

void ModelRegistry::reap() {
    // use_count 1: only this list holds it, so no request can start on it any more.
    std::erase_if(retired_, [](const Retired& r) { return r.model.use_count() == 1 && r.model->in_flight() == 0; });
}

bool ModelRegistry::make_room(const std::string& for_id, int64_t need) {
    if (budget_ <= 0) return true;
    while (used_locked() + need > budget_) {
        Slot* victim = nullptr;
        for (Slot& s : slots_) {
            if (s.source.id == for_id || s.state != ModelState::loaded || s.reload_queued) continue;
            // Held but idle (a request about to start on it) is fine: it retires and lives on until
            // released, still counted, so the load waits for it.
            if (s.current->in_flight() > 0 || s.waiting > 0) continue;
            if (!victim || s.last_used < victim->last_used) victim = &s;
        }
        if (!victim) return false;  // everything is busy: wait for a request to finish
        log_info("serve: unloading model '{}' (least recently used) to make room for '{}'", victim->source.id, for_id);
        retired_.push_back({victim->source.id, std::move(victim->current), victim->memory});
        victim->current.reset();
        victim->state = ModelState::unloaded;
        reap();
    }
    return true;
}

void ModelRegistry::run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
        reap();
        if (tasks_.empty()) {
            wake_.wait_for(lock, std::chrono::milliseconds(50));
            continue;
        }
        Task task = tasks_.front();
        tasks_.pop_front();
        load(task, lock);
    }
}

void ModelRegistry::load(const Task& task, std::unique_lock<std::mutex>& lock) {
    Slot* s = &slot(task.id);
    ModelSource source = s->source;
    if (task.reload) source.path = s->reload_path.value_or(source.path);
    // A path seen before keeps its measured size; a new one is estimated.
    int64_t need = source.path == s->source.path && s->version > 0 ? s->memory : estimate_(source);
    // Measured larger than the whole budget at its last load: no unloading makes room, so waiting
    // would hang its requests for ever; refuse this load (it is retried as any failed load is).
    if (budget_ > 0 && need > budget_ && !task.reload) {
        s->error = fmt::format("the model '{}' took {} MiB at its last load, more than the whole --models-memory "
                               "budget of {} MiB",
                               task.id, need >> 20, budget_ >> 20);
        log_error("serve: loading model '{}' refused: {}", task.id, s->error);
        s->state = ModelState::failed;
        s->failed_at = std::chrono::steady_clock::now();
        return;
    }
    // A first load waits for room (requests finishing on idle models free it); a reload overlaps
    // the old version by design, so it only frees what is idle and goes ahead.
    while (!stop_ && !make_room(task.id, need) && !task.reload) {
        wake_.wait_for(lock, std::chrono::milliseconds(20));
        reap();
    }
    if (stop_) return;
    loading_bytes_ = need;
    lock.unlock();
    std::shared_ptr<ServedModel> model;
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t resident_before = probe_ ? probe_() : 0;
    try {
        model = factory_(source);
        // Loads run one at a time on this thread, so the growth is this model's (give or take
        // what requests on other models allocate meanwhile). It only ever raises the estimate:
        // memory the allocator reuses from a freed model does not show as growth.
        if (model && probe_) need = std::max(probe_() - resident_before, need);
        if (!model) error = "the model factory returned nothing";
    } catch (const std::exception& e) {
        error = e.what();
    }
    lock.lock();
    loading_bytes_ = 0;
    s = &slot(task.id);  // slots_ never changes size, but look it up again for clarity
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (task.reload) {
        s->reload_queued = false;
        s->reload_path.reset();
    }
    if (!model) {
        s->error = error;
        log_error("serve: loading model '{}' from {} failed: {}", task.id, source.path, error);
        if (!task.reload || s->state != ModelState::loaded) {
            s->state = ModelState::failed;
            s->failed_at = std::chrono::steady_clock::now();
        }
        return;  // a failed reload keeps the old version serving
    }
    if (s->current) retired_.push_back({task.id, std::move(s->current), s->memory});
    s->current = std::move(model);
    s->source.path = source.path;
    s->memory = need;
    s->state = ModelState::loaded;
    s->error.clear();
    s->version++;
    log_info("serve: model '{}' version {} loaded from {} in {:.2f} s", task.id, s->version, source.path, seconds);
    reap();
}

}  // namespace pagoda::server
