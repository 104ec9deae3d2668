// Read-bandwidth patterns: each reads every 64-bit word of its memory exactly once (its sum equals a
// plain sum, tails and odd sizes included), the best figure is the best pattern's, and the bound
// of a decode step is the higher of the weights' and the scratch buffer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/read_bandwidth.h"
#include "core/thread_pool.h"

namespace pagoda {
namespace {

uint64_t plain_word_sum(const uint8_t* p, size_t bytes) {
    uint64_t sum = 0;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        sum += w;
    }
    return sum;
}

TEST(ReadBandwidth, EveryPatternReadsEveryWordOnce) {
    std::vector<uint8_t> data((size_t(1) << 20) + 4096);
    std::mt19937_64 rng(7);
    for (auto& b : data) b = uint8_t(rng());
    // Sizes around each pattern's edges: empty, under a word, under a block, one block per stream,
    // a tail of whole blocks beside a tail of words.
    const size_t sizes[] = {0, 7, 8, 120, 128, 136, 256, 1000, 1024, 1024 + 8, 128 * 8 * 3 + 72,
                            128 * 8 * 5 + 128 * 3 + 40, size_t(1) << 20, (size_t(1) << 20) + 24};
    const auto patterns = read_patterns();
    ASSERT_EQ(patterns.size(), 8u);
    for (const ReadPattern& pattern : patterns)
        for (size_t offset : {size_t(0), size_t(64), size_t(3)})  // aligned, line-aligned, unaligned
            for (size_t n : sizes) {
                const uint8_t* p = data.data() + offset;
                EXPECT_EQ(read_sum(p, n, pattern), plain_word_sum(p, n))
                    << pattern.name() << ", " << n << " bytes at offset " << offset;
            }
}

TEST(ReadBandwidth, PatternsAreStreamsOneToEightWithAndWithoutPrefetch) {
    std::vector<std::string> names;
    for (const auto& p : read_patterns()) names.push_back(p.name());
    EXPECT_EQ(names, (std::vector<std::string>{"1 stream", "1 stream + prefetch", "2 streams", "2 streams + prefetch",
                                               "4 streams", "4 streams + prefetch", "8 streams",
                                               "8 streams + prefetch"}));
    uint8_t byte = 0;
    EXPECT_THROW(read_sum(&byte, 1, ReadPattern{3, false}), Error);
}

TEST(ReadBandwidth, TheBestIsTheBestPatternsFigure) {
    ThreadPool pool(2);
    std::vector<uint8_t> a(size_t(8) << 20, 1);
    const std::vector<std::span<const uint8_t>> regions = {std::span<const uint8_t>(a)};
    const ReadBandwidth r = measure_best_read_bandwidth(pool, regions, 1);
    ASSERT_EQ(r.by_pattern.size(), read_patterns().size());
    const auto best = std::max_element(r.by_pattern.begin(), r.by_pattern.end());
    EXPECT_GT(r.gbps, 0.1);
    EXPECT_EQ(r.gbps, *best);
    EXPECT_EQ(r.pattern.name(), read_patterns()[size_t(best - r.by_pattern.begin())].name());
    for (double g : r.by_pattern) EXPECT_GT(g, 0.0);
    // Nothing to read: every figure 0.
    const ReadBandwidth none = measure_best_read_bandwidth(pool, std::vector<std::span<const uint8_t>>{}, 1);
    EXPECT_EQ(none.gbps, 0.0);
}

TEST(ReadBandwidth, TheBoundIsTheHigherOfWeightsAndScratch) {
    ThreadPool pool(2);
    const ReadScratch scratch(size_t(16) << 20);
    std::vector<uint8_t> weights(size_t(8) << 20, 3);
    const std::vector<std::span<const uint8_t>> regions = {std::span<const uint8_t>(weights)};
    const ReadBound b = measure_read_bound(pool, regions, scratch);
    EXPECT_GT(b.weights_gbps, 0.0);
    EXPECT_GT(b.buffer_gbps, 0.0);
    EXPECT_EQ(b.gbps, std::max(b.weights_gbps, b.buffer_gbps));
    EXPECT_EQ(b.on_weights, b.weights_gbps >= b.buffer_gbps);
    EXPECT_NE(b.describe().find(b.on_weights ? "over the weights" : "over a scratch buffer"), std::string::npos);
    // No weights (a model whose memory is not host memory): the scratch buffer alone.
    const ReadBound s = measure_read_bound(pool, std::vector<std::span<const uint8_t>>{}, scratch);
    EXPECT_FALSE(s.on_weights);
    EXPECT_EQ(s.weights_gbps, 0.0);
    EXPECT_EQ(s.gbps, s.buffer_gbps);
    EXPECT_EQ(ReadBound{}.describe(), "not measured");
}

}  // namespace
}  // namespace pagoda
