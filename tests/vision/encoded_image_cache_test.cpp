// The encoded-image cache (vision/encoded_image_cache.h): hits return what was stored, the bound
// in bytes holds by evicting the least recently used entry, a different picture or projector
// misses, 0 bytes keeps nothing, and concurrent use keeps the counts exact.
#include <gtest/gtest.h>
#include <thread>

#include "vision/encoded_image_cache.h"

namespace pagoda::vision {
namespace {

std::vector<float> rows(float v, size_t n = 100) { return std::vector<float>(n, v); }

TEST(EncodedImageCache, HitReturnsTheStoredEmbeddingsAndOtherKeysMiss) {
    EncodedImageCache cache(1 << 20);
    const ImageCacheKey a{.projector = 1, .pixels = 10};
    EXPECT_FALSE(cache.find(a));
    cache.insert(a, rows(0.5f));
    auto hit = cache.find(a);
    ASSERT_TRUE(hit);
    EXPECT_EQ(*hit, rows(0.5f));
    EXPECT_FALSE(cache.find({.projector = 1, .pixels = 11})) << "another picture";
    EXPECT_FALSE(cache.find({.projector = 2, .pixels = 10})) << "the same picture through another projector";
    const ImageCacheStats s = cache.stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 3u);
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(s.bytes, EncodedImageCache::entry_bytes(100));
    EXPECT_EQ(s.capacity_bytes, uint64_t(1) << 20);
}

TEST(EncodedImageCache, EvictsTheLeastRecentlyUsedAtTheBound) {
    // Room for exactly three entries of 100 floats.
    EncodedImageCache cache(3 * EncodedImageCache::entry_bytes(100));
    for (uint64_t i = 1; i <= 3; ++i) cache.insert({1, i}, rows(float(i)));
    ASSERT_TRUE(cache.find({1, 1}));  // 1 is now the most recent; 2 the least
    cache.insert({1, 4}, rows(4));
    EXPECT_FALSE(cache.find({1, 2})) << "the least recently used went first";
    for (uint64_t i : {1, 3, 4}) {
        auto hit = cache.find({1, i});
        ASSERT_TRUE(hit) << i;
        EXPECT_EQ(*hit, rows(float(i)));
    }
    ImageCacheStats s = cache.stats();
    EXPECT_EQ(s.evictions, 1u);
    EXPECT_EQ(s.entries, 3u);
    EXPECT_EQ(s.bytes, 3 * EncodedImageCache::entry_bytes(100));
    // A larger entry makes room for itself by evicting as many as it needs.
    cache.insert({1, 5}, rows(5, 250));
    s = cache.stats();
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(s.evictions, 4u);
    EXPECT_LE(s.bytes, s.capacity_bytes);
    // One over the whole bound is not kept (and evicts nothing).
    cache.insert({1, 6}, rows(6, 1000));
    EXPECT_FALSE(cache.find({1, 6}));
    EXPECT_TRUE(cache.find({1, 5}));
    // Replacing a key keeps one entry and its new value.
    cache.insert({1, 5}, rows(7, 250));
    EXPECT_EQ(cache.stats().entries, 1u);
    EXPECT_EQ(cache.find({1, 5})->at(0), 7.f);
}

TEST(EncodedImageCache, ZeroBytesIsOff) {
    EncodedImageCache cache(0);
    cache.insert({1, 1}, rows(1, 1));
    EXPECT_FALSE(cache.find({1, 1}));
    EXPECT_EQ(cache.stats().entries, 0u);
    EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(EncodedImageCache, ConcurrentUseKeepsExactCounts) {
    EncodedImageCache cache(8 * EncodedImageCache::entry_bytes(16));
    constexpr int kThreads = 4, kRounds = 2000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&cache, t] {
            for (int i = 0; i < kRounds; ++i) {
                const ImageCacheKey key{1, uint64_t((i * 7 + t) % 12)};
                if (auto hit = cache.find(key)) EXPECT_EQ(hit->at(0), float(key.pixels));
                else cache.insert(key, rows(float(key.pixels), 16));
            }
        });
    for (auto& t : threads) t.join();
    const ImageCacheStats s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, uint64_t(kThreads * kRounds));
    EXPECT_LE(s.entries, 8u);
    EXPECT_EQ(s.bytes, s.entries * EncodedImageCache::entry_bytes(16));
}

}  // namespace
}  // namespace pagoda::vision
