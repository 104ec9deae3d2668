// The serving engine: one thread owns the StepModel, the block manager and the scheduler
// (EngineCore) and runs steps while there is work, sleeping on a condition variable when idle.
// Any thread may submit(), cancel() and read stats() and kv_snapshot(). submit() validates at once and throws
// pagoda::Error for a request that is malformed or can never fit (prompt longer than the model
// context or the whole KV cache); otherwise deltas arrive on the handle's queue, or through
// `on_delta` on the engine thread when given (a server can forward them without a polling thread).
// shutdown() stops accepting; it either drains (finishes what was submitted) or cancels everything,
// interrupting a forward step in flight at its next op (those requests end cancelled). stats() is
// refreshed after every step and when a step is planned, so a long step's sequences show as running.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/delta_queue.h"
#include "engine/engine_core.h"
#include "model/step_model.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

class Engine {
public:
    Engine(std::unique_ptr<model::StepModel> model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
           EngineOptions options);
    ~Engine();  // shutdown(false)

    // Queues a request. Throws pagoda::Error when it is invalid or the engine is shut down. With
    // on_delta, deltas go only to the callback (on the engine thread) and the handle's queue stays empty.
    RequestHandle submit(Request request, DeltaCallback on_delta = {});
    // Finishes the request with FinishReason::cancelled (no-op if already done or unknown).
    void cancel(RequestId id);
    // Stops accepting requests; drain: wait until submitted work finishes, else cancel it. Joins.
    void shutdown(bool drain = false);

    EngineStats stats() const;
    // The KV pool's blocks and owners, taken by the engine thread between steps. A snapshot at most
    // `max_age` old is returned as it is; otherwise the engine thread is asked for a new one (it
    // wakes if idle, else takes it after the current step) and this waits up to `wait` for it,
    // returning the older one (see KvSnapshot::taken) if the step runs longer.
    KvSnapshot kv_snapshot(std::chrono::milliseconds max_age = std::chrono::milliseconds(200),
                           std::chrono::milliseconds wait = std::chrono::milliseconds(1000));
    const model::StepModelInfo& model_info() const { return info_; }
    int64_t context_limit() const { return context_limit_; }
    const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }

private:
    struct Pending {
        RequestId id;
        Request request;
        std::shared_ptr<DeltaQueue> queue;
        DeltaCallback callback;
        Clock::time_point arrival;
    };
    void run();

    std::unique_ptr<model::StepModel> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    model::StepModelInfo info_;
    std::unique_ptr<EngineCore> core_;  // touched only by the engine thread after construction
    int64_t context_limit_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<Pending> inbox_;
    std::vector<RequestId> cancels_;
    bool accepting_ = true, stop_ = false, drain_ = false;
    std::atomic<bool> interrupt_{false};  // read by the model between ops
    RequestId next_id_ = 1;
    EngineStats snapshot_;
    int64_t rejected_ = 0;
    // kv_snapshot(): requested by readers, taken by the engine thread (guarded by mutex_).
    std::condition_variable kv_taken_;
    bool kv_wanted_ = false;
    KvSnapshot kv_snapshot_;
    uint64_t kv_generation_ = 0;  // snapshots taken so far
    bool thread_done_ = false;
    std::thread thread_;
};

}  // namespace pagoda::engine
