// A bounded LRU of the vision tower's output, so a picture seen before skips the tower. Keyed by
// the projector's identity and the decoded pixels' hash (EncodedImage::hash: the same picture in
// another encoding hits too). Bounded by the bytes of the embeddings it holds (plus a fixed
// per-entry overhead); an entry over the whole bound is not kept; 0 bytes: off (every lookup
// misses and nothing is kept). Thread-safe: lookups and inserts from request threads at once.
#pragma once
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace pagoda::vision {

struct ImageCacheKey {
    uint64_t projector = 0;  // ImageEncoder::projector_id(): which tower made the embeddings
    uint64_t pixels = 0;     // EncodedImage::hash
    bool operator==(const ImageCacheKey&) const = default;
};

struct ImageCacheStats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    uint64_t entries = 0, bytes = 0, capacity_bytes = 0;
};

class EncodedImageCache {
public:
    explicit EncodedImageCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
    // The embeddings stored under `key` (a copy; the entry becomes the most recent), counting a hit,
    // or nullopt counting a miss.
    std::optional<std::vector<float>> find(const ImageCacheKey& key);
    // Keeps `embeddings` under `key` (replacing an entry there), evicting the least recently used
    // entries until the bound holds. No-op when off or when the entry alone is over the bound.
    void insert(const ImageCacheKey& key, std::vector<float> embeddings);
    ImageCacheStats stats() const;
    // What one entry of `floats` embeddings counts against the bound.
    static uint64_t entry_bytes(size_t floats) { return uint64_t(floats) * sizeof(float) + kEntryOverhead; }

private:
    static constexpr uint64_t kEntryOverhead = 96;  // list node, map node, key: an estimate
    struct KeyHash {
        size_t operator()(const ImageCacheKey& k) const { return size_t(k.pixels ^ (k.projector * 0x9e3779b97f4a7c15ull)); }
    };
    struct Entry {
        ImageCacheKey key;
        std::vector<float> embeddings;
    };
    void erase_locked(std::list<Entry>::iterator it);

    const uint64_t capacity_;
    mutable std::mutex mutex_;
    std::list<Entry> lru_;  // most recent first
    std::unordered_map<ImageCacheKey, std::list<Entry>::iterator, KeyHash> index_;
    uint64_t bytes_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace pagoda::vision
