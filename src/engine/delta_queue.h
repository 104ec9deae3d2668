// The per-request stream of deltas between the engine thread (producer) and a caller (consumer):
// a mutex + condition-variable queue. pop() waits up to a timeout; closed() says the request is done
// and everything was delivered. RequestHandle is what Engine::submit returns.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace pagoda::engine {

class DeltaQueue {
public:
    void push(Delta delta);  // a delta with request_done closes the queue
    // Next delta, waiting up to `timeout`; nullopt on timeout or when closed and drained.
    std::optional<Delta> pop(std::chrono::milliseconds timeout);
    std::optional<Delta> try_pop();
    bool closed() const;       // the final delta was pushed
    bool finished() const;     // closed and drained

private:
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Delta> items_;
    bool closed_ = false;
};

class RequestHandle {
public:
    RequestHandle() = default;
    RequestHandle(RequestId id, std::shared_ptr<DeltaQueue> queue) : id_(id), queue_(std::move(queue)) {}
    RequestId id() const { return id_; }
    std::optional<Delta> next(std::chrono::milliseconds timeout) { return queue_->pop(timeout); }
    std::optional<Delta> try_next() { return queue_->try_pop(); }
    bool finished() const { return queue_->finished(); }
    const std::shared_ptr<DeltaQueue>& queue() const { return queue_; }

private:
    RequestId id_ = 0;
    std::shared_ptr<DeltaQueue> queue_;
};

}  // namespace pagoda::engine
