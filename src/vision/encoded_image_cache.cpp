#include "vision/encoded_image_cache.h"

namespace pagoda::vision {

std::optional<std::vector<float>> EncodedImageCache::find(const ImageCacheKey& key) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) {
        ++misses_;
        return std::nullopt;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->embeddings;
}

void EncodedImageCache::erase_locked(std::list<Entry>::iterator it) {
    bytes_ -= entry_bytes(it->embeddings.size());
    index_.erase(it->key);
    lru_.erase(it);
}

void EncodedImageCache::insert(const ImageCacheKey& key, std::vector<float> embeddings) {
    const uint64_t need = entry_bytes(embeddings.size());
    if (capacity_ == 0 || need > capacity_) return;
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) erase_locked(it->second);
    while (bytes_ + need > capacity_ && !lru_.empty()) {
        erase_locked(std::prev(lru_.end()));
        ++evictions_;
    }
    lru_.push_front({key, std::move(embeddings)});
    index_[key] = lru_.begin();
    bytes_ += need;
}

ImageCacheStats EncodedImageCache::stats() const {
    std::lock_guard lock(mutex_);
    return {.hits = hits_, .misses = misses_, .evictions = evictions_, .entries = uint64_t(lru_.size()),
            .bytes = bytes_, .capacity_bytes = capacity_};
}

}  // namespace pagoda::vision
