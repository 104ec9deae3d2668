#include "engine/state_snapshots.h"

namespace pagoda::engine {

StateSnapshots::StateSnapshots(std::vector<int32_t> slots) : capacity_(int32_t(slots.size())), free_(std::move(slots)) {}

int32_t StateSnapshots::find(uint64_t hash) const {
    auto it = by_hash_.find(hash);
    return it == by_hash_.end() ? -1 : it->second.slot;
}

void StateSnapshots::touch(uint64_t hash) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return;
    lru_.splice(lru_.end(), lru_, it->second.lru);
    ++restored_;
}

int32_t StateSnapshots::take(uint64_t hash) {
    if (capacity_ == 0 || by_hash_.count(hash)) return -1;
    if (free_.empty()) drop(lru_.front());  // capacity > 0 and none free: every slot holds one
    const int32_t slot = free_.back();
    free_.pop_back();
    lru_.push_back(hash);
    by_hash_.emplace(hash, Entry{slot, std::prev(lru_.end())});
    ++taken_;
    return slot;
}

void StateSnapshots::drop(uint64_t hash) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return;
    free_.push_back(it->second.slot);
    lru_.erase(it->second.lru);
    by_hash_.erase(it);
}

void StateSnapshots::clear() {
    while (!lru_.empty()) drop(lru_.front());
}

}  // namespace pagoda::engine
