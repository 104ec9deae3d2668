// The host-memory level of the prefix tier: blocks evicted from the KV pool, kept by hash in a
// bounded LRU. Every entry costs TierBlock::footprint() bytes and the sum never exceeds the
// capacity: putting a block evicts least recently used ones until it fits (a block larger than
// the whole capacity is refused). get() makes an entry the most recently used. Entries are shared
// and immutable, so the file writer can hold one while the store drops it. Single-threaded (the
// engine thread owns it).
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>

#include "kv/tier_block.h"

namespace pagoda::kv {

class HostBlockStore {
public:
    explicit HostBlockStore(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

    uint64_t capacity() const { return capacity_; }
    uint64_t bytes() const { return bytes_; }
    size_t size() const { return index_.size(); }
    int64_t evictions() const { return evictions_; }
    bool contains(uint64_t hash) const { return index_.count(hash) != 0; }

    // Stores (or refreshes) a block; false when it cannot fit at all.
    bool put(std::shared_ptr<const TierBlock> block);
    // The block stored under `hash` (now most recently used), or null.
    std::shared_ptr<const TierBlock> get(uint64_t hash);

private:
    using Lru = std::list<std::shared_ptr<const TierBlock>>;  // front: least recently used
    uint64_t capacity_;
    uint64_t bytes_ = 0;
    int64_t evictions_ = 0;
    Lru lru_;
    std::unordered_map<uint64_t, Lru::iterator> index_;
};

}  // namespace pagoda::kv
