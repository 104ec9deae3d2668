#include "engine/delta_queue.h"

namespace pagoda::engine {

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "cancelled";
        case FinishReason::error: return "error";
    }
    return "error";
}

void DeltaQueue::push(Delta delta) {
    {
        std::lock_guard lock(mutex_);
        if (delta.request_done) closed_ = true;
        items_.push_back(std::move(delta));
    }
    ready_.notify_all();
}

std::optional<Delta> DeltaQueue::pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    Delta d = std::move(items_.front());
    items_.pop_front();
    return d;
}

std::optional<Delta> DeltaQueue::try_pop() { return pop(std::chrono::milliseconds(0)); }

bool DeltaQueue::closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
}

bool DeltaQueue::finished() const {
    std::lock_guard lock(mutex_);
    return closed_ && items_.empty();
}

}  // namespace pagoda::engine
