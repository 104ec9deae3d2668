#include "kv/host_block_store.h"

namespace pagoda::kv {

bool HostBlockStore::put(std::shared_ptr<const TierBlock> block) {
    if (!block) return false;
    if (auto it = index_.find(block->hash); it != index_.end()) {
        lru_.splice(lru_.end(), lru_, it->second);  // same content: only refresh its place
        return true;
    }
    const uint64_t cost = block->footprint();
    if (cost > capacity_) return false;
    while (bytes_ + cost > capacity_) {
        const auto& victim = lru_.front();
        bytes_ -= victim->footprint();
        index_.erase(victim->hash);
        lru_.pop_front();
        ++evictions_;
    }
    const uint64_t hash = block->hash;
    lru_.push_back(std::move(block));
    index_[hash] = std::prev(lru_.end());
    bytes_ += cost;
    return true;
}

std::shared_ptr<const TierBlock> HostBlockStore::get(uint64_t hash) {
    auto it = index_.find(hash);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.end(), lru_, it->second);
    return *it->second;
}

}  // namespace pagoda::kv
