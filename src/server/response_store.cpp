#include "server/response_store.h"

namespace pagoda::server {

ResponseStore::ResponseStore(size_t max_entries, double ttl_seconds) : max_entries_(max_entries), ttl_(ttl_seconds) {}

void ResponseStore::prune(double now) {
    while (!order_.empty() && (order_.front().expires <= now || order_.size() > max_entries_)) {
        index_.erase(order_.front().id);
        order_.pop_front();
    }
}

void ResponseStore::put(const std::string& id, StoredResponse entry, double now) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(id); it != index_.end()) {
        order_.erase(it->second);
        index_.erase(it);
    }
    order_.push_back({id, now + ttl_, std::make_shared<const StoredResponse>(std::move(entry))});
    index_[id] = std::prev(order_.end());
    prune(now);
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id, double now) {
    std::lock_guard lock(mutex_);
    prune(now);
    auto it = index_.find(id);
    return it == index_.end() ? nullptr : it->second->entry;
}

bool ResponseStore::erase(const std::string& id, double now) {
    std::lock_guard lock(mutex_);
    prune(now);
    auto it = index_.find(id);
    if (it == index_.end()) return false;
    order_.erase(it->second);
    index_.erase(it);
    return true;
}

size_t ResponseStore::size(double now) {
    std::lock_guard lock(mutex_);
    prune(now);
    return order_.size();
}

}  // namespace pagoda::server
