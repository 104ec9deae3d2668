#include "kv/block_manager.h"

#include <gtest/gtest.h>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kv/block_hash.h"

namespace pagoda::kv {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 1) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), start);
    return t;
}

TEST(BlockManager, AllocatesBlocksAndMapsSlots) {
    BlockManager bm(8, 4);
    auto r = bm.allocate(1, iota_tokens(10));
    ASSERT_EQ(r.status, KvStatus::ok);
    EXPECT_EQ(r.n_cached_tokens, 0);
    EXPECT_EQ(bm.block_table(1), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(bm.num_used_blocks(), 3);
    EXPECT_EQ(bm.num_free_blocks(), 5);
    std::vector<int64_t> s(10);
    bm.slots(1, 0, 10, s.data());
    for (int p = 0; p < 10; ++p) EXPECT_EQ(s[p], bm.block_table(1)[p / 4] * 4 + p % 4);
    std::vector<BlockCopy> copies;
    ASSERT_EQ(bm.append(1, {{99, 100}}, copies), KvStatus::ok);  // 12 tokens: still 3 blocks
    EXPECT_EQ(bm.block_table(1).size(), 3u);
    ASSERT_EQ(bm.append(1, {{101}}, copies), KvStatus::ok);  // 13th token opens block 4
    EXPECT_EQ(bm.block_table(1).size(), 4u);
    EXPECT_TRUE(copies.empty());
    EXPECT_EQ(bm.slot(1, 12), bm.block_table(1)[3] * 4);
    bm.free(1);
    EXPECT_EQ(bm.num_free_blocks(), 8);
    EXPECT_FALSE(bm.has_sequence(1));
}

TEST(BlockManager, RejectsMisuse) {
    BlockManager bm(4, 2);
    EXPECT_THROW(bm.allocate(1, {}), Error);
    bm.allocate(1, iota_tokens(3));
    EXPECT_THROW(bm.allocate(1, iota_tokens(3)), Error);
    EXPECT_THROW(bm.free(2), Error);
    EXPECT_THROW(bm.slot(1, 3), Error);
    EXPECT_THROW(bm.mark_computed(1, 4), Error);
    EXPECT_THROW(bm.fork(1, 2), Error);  // not computed yet
    bm.mark_computed(1, 3);
    EXPECT_THROW(bm.mark_computed(1, 2), Error);
    EXPECT_THROW(BlockManager(4, 3), Error);
    EXPECT_THROW(BlockManager(0, 4), Error);
}

TEST(BlockManager, OutOfBlocksLeavesStateUntouched) {
    BlockManager bm(3, 4);
    ASSERT_EQ(bm.allocate(1, iota_tokens(8)).status, KvStatus::ok);
    EXPECT_FALSE(bm.can_allocate(iota_tokens(5, 50)));
    EXPECT_EQ(bm.allocate(2, iota_tokens(5, 50)).status, KvStatus::out_of_blocks);
    EXPECT_FALSE(bm.has_sequence(2));
    EXPECT_EQ(bm.num_free_blocks(), 1);
    bm.mark_computed(1, 8);
    std::vector<BlockCopy> copies;
    std::vector<int32_t> five = iota_tokens(5, 9);
    EXPECT_FALSE(bm.can_append(1, 5));
    EXPECT_EQ(bm.append(1, five, copies), KvStatus::out_of_blocks);
    EXPECT_EQ(bm.num_tokens(1), 8);
    EXPECT_EQ(bm.block_table(1).size(), 2u);
    EXPECT_TRUE(bm.can_append(1, 4));
}

TEST(BlockManager, ReusesComputedFullPrefixBlocks) {
    BlockManager bm(16, 4);
    std::vector<int32_t> a = iota_tokens(10);  // blocks [1..4] [5..8] [9,10]
    bm.allocate(1, a);
    // Not computed yet: nothing to share.
    EXPECT_EQ(bm.blocks_needed(a), 3);
    EXPECT_EQ(bm.stats().queried_tokens, 10);
    bm.mark_computed(1, 10);
    std::vector<int32_t> b = iota_tokens(9);
    b[8] = 777;  // shares the first two blocks, differs in the third
    auto r = bm.allocate(2, b);
    ASSERT_EQ(r.status, KvStatus::ok);
    EXPECT_EQ(r.n_cached_tokens, 8);
    EXPECT_EQ(bm.num_computed(2), 8);
    EXPECT_EQ(bm.block_table(2)[0], bm.block_table(1)[0]);
    EXPECT_EQ(bm.block_table(2)[1], bm.block_table(1)[1]);
    EXPECT_NE(bm.block_table(2)[2], bm.block_table(1)[2]);
    EXPECT_EQ(bm.ref_count(bm.block_table(1)[0]), 2);
    EXPECT_EQ(bm.stats().hit_tokens, 8);
    EXPECT_EQ(bm.stats().queried_tokens, 19);

    // A prompt that is exactly the cached blocks must still compute its last token: the last
    // block is not reused, so only one block (4 tokens) is served.
    auto r3 = bm.allocate(3, iota_tokens(8));
    EXPECT_EQ(r3.n_cached_tokens, 4);
    EXPECT_NE(bm.block_table(3)[1], bm.block_table(1)[1]);

    // A different extra key (another model / adapter) never shares.
    auto r4 = bm.allocate(4, iota_tokens(10), /*extra_key=*/42);
    EXPECT_EQ(r4.n_cached_tokens, 0);
    // A different first block breaks the chain even if later blocks match.
    std::vector<int32_t> c = iota_tokens(10);
    c[0] = -5;
    EXPECT_EQ(bm.allocate(5, c).n_cached_tokens, 0);
}

TEST(BlockManager, FreedCachedBlocksAreEvictableAndEvictedLruWhenFreeListEmpty) {
    BlockManager bm(4, 2);
    bm.allocate(1, iota_tokens(5));  // 3 blocks, two full once computed
    bm.mark_computed(1, 5);
    const std::vector<int32_t> t1 = bm.block_table(1);
    bm.free(1);
    EXPECT_EQ(bm.num_evictable_blocks(), 2);
    EXPECT_EQ(bm.num_free_blocks(), 2);
    EXPECT_TRUE(bm.is_cached(t1[0]));
    EXPECT_FALSE(bm.is_cached(t1[2]));

    // Re-referencing a cached block takes it off the evictable list.
    auto r = bm.allocate(2, iota_tokens(3));
    EXPECT_EQ(r.n_cached_tokens, 2);
    EXPECT_EQ(bm.block_table(2)[0], t1[0]);
    EXPECT_EQ(bm.num_evictable_blocks(), 1);
    EXPECT_EQ(bm.num_free_blocks(), 1);
    bm.free(2);

    // Uses the free list first, then evicts the least recently released cached block.
    // Release order of seq 1 was tail first: t1[1] then t1[0]; seq 2 re-released t1[0] later.
    bm.allocate(3, iota_tokens(2, 100));
    EXPECT_EQ(bm.stats().evicted_blocks, 0);
    bm.allocate(4, iota_tokens(2, 200));
    EXPECT_EQ(bm.stats().evicted_blocks, 0);
    bm.allocate(5, iota_tokens(2, 300));
    EXPECT_EQ(bm.stats().evicted_blocks, 1);
    EXPECT_EQ(bm.block_table(5)[0], t1[1]);
    EXPECT_FALSE(bm.is_cached(t1[1]));
    EXPECT_TRUE(bm.is_cached(t1[0]));
    EXPECT_EQ(bm.num_available_blocks(), 1);
}

TEST(BlockManager, ForkSharesBlocksAndCopiesOnWrite) {
    BlockManager bm(8, 4);
    bm.allocate(1, iota_tokens(6));
    bm.mark_computed(1, 6);
    bm.fork(1, 2);
    EXPECT_EQ(bm.block_table(2), bm.block_table(1));
    EXPECT_EQ(bm.ref_count(bm.block_table(1)[1]), 2);
    std::vector<BlockCopy> copies;
    ASSERT_EQ(bm.append(2, {{7}}, copies), KvStatus::ok);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].src, bm.block_table(1)[1]);
    EXPECT_EQ(copies[0].dst, bm.block_table(2)[1]);
    EXPECT_NE(bm.block_table(2)[1], bm.block_table(1)[1]);
    EXPECT_EQ(bm.block_table(2)[0], bm.block_table(1)[0]);  // full block stays shared
    EXPECT_EQ(bm.ref_count(bm.block_table(1)[1]), 1);
    copies.clear();
    ASSERT_EQ(bm.append(1, {{8}}, copies), KvStatus::ok);  // parent now sole owner: write in place
    EXPECT_TRUE(copies.empty());
    // Appending at a block boundary needs no copy even when the full last block is shared.
    BlockManager bm2(8, 2);
    bm2.allocate(1, iota_tokens(4));
    bm2.mark_computed(1, 4);
    bm2.fork(1, 2);
    ASSERT_EQ(bm2.append(2, {{5}}, copies), KvStatus::ok);
    EXPECT_TRUE(copies.empty());
}

TEST(BlockManager, PrefixCachingCanBeTurnedOff) {
    BlockManager bm(8, 2, /*prefix_caching=*/false);
    bm.allocate(1, iota_tokens(5));
    bm.mark_computed(1, 5);
    EXPECT_EQ(bm.allocate(2, iota_tokens(5)).n_cached_tokens, 0);
    bm.free(1);
    EXPECT_EQ(bm.num_evictable_blocks(), 0);
    EXPECT_EQ(bm.num_free_blocks(), 5);
    EXPECT_EQ(bm.stats().hit_tokens, 0);
}

TEST(BlockManager, ClearPrefixCacheDropsEverything) {
    BlockManager bm(8, 2);
    bm.allocate(1, iota_tokens(5));
    bm.mark_computed(1, 5);
    bm.allocate(2, iota_tokens(7, 50));
    bm.mark_computed(2, 7);
    bm.free(1);
    bm.clear_prefix_cache();
    EXPECT_EQ(bm.num_evictable_blocks(), 0);
    EXPECT_EQ(bm.num_free_blocks(), 4);
    EXPECT_EQ(bm.allocate(3, iota_tokens(5)).n_cached_tokens, 0);
    EXPECT_EQ(bm.allocate(4, iota_tokens(7, 50)).n_cached_tokens, 0);
}

}  // namespace
}  // namespace pagoda::kv

namespace pagoda::kv {
namespace {

// The second tier's hooks: eviction reports the block with its hash inputs before dropping it,
// and tier blocks given to allocate() count as computed and are published at once.
TEST(BlockManagerTier, EvictionHookSeesTheBlockAndTierBlocksArePublished) {
    BlockManager bm(4, 4);
    const auto prompt = iota_tokens(13);  // 3 reusable blocks
    ASSERT_EQ(bm.allocate(1, prompt).status, KvStatus::ok);
    bm.mark_computed(1, 13);
    const auto table = bm.block_table(1);
    bm.free(1);  // 3 cached, evictable
    std::vector<EvictedBlock> seen;
    std::vector<std::vector<int32_t>> seen_tokens;
    bm.set_on_evict([&](const EvictedBlock& e) {
        seen.push_back(e);
        seen_tokens.emplace_back(e.tokens.begin(), e.tokens.end());
        EXPECT_TRUE(bm.is_cached(e.block));  // still published while the hook runs
    });
    ASSERT_EQ(bm.allocate(2, iota_tokens(16, 100)).status, KvStatus::ok);  // 4 blocks: evicts all 3
    ASSERT_EQ(seen.size(), 3u);
    // Deepest first (the tail of a prefix is released first, so it is the least recently used).
    EXPECT_EQ(seen[0].block, table[2]);
    EXPECT_EQ(seen_tokens[0], std::vector<int32_t>(prompt.begin() + 8, prompt.begin() + 12));
    EXPECT_EQ(seen[2].parent_hash, kRootBlockHash);
    bm.free(2);
    bm.set_on_evict({});

    // The prompt comes back with its 3 blocks from the tier: nothing of it is in the pool.
    EXPECT_EQ(bm.cached_prefix_blocks(prompt), 0);
    EXPECT_EQ(bm.max_reusable_blocks(prompt), 3);
    EXPECT_THROW(bm.allocate(3, prompt, 0, true, 4), Error);  // more than may be reused
    auto r = bm.allocate(3, prompt, 0, true, 3);
    ASSERT_EQ(r.status, KvStatus::ok);
    EXPECT_EQ(r.n_cached_tokens, 12);
    ASSERT_EQ(r.tier_blocks.size(), 3u);
    EXPECT_EQ(r.tier_blocks, std::vector<int32_t>(bm.block_table(3).begin(), bm.block_table(3).begin() + 3));
    EXPECT_EQ(bm.num_computed(3), 12);
    EXPECT_EQ(bm.stats().tier_hit_tokens, 12);
    // Published at once: another sequence with the prompt shares them from the pool.
    EXPECT_EQ(bm.cached_prefix_blocks(prompt), 3);
    bm.free(3);
    std::vector<EvictedBlock> listed;
    bm.for_each_evictable([&](const EvictedBlock& e) { listed.push_back(e); });
    EXPECT_EQ(listed.size(), 3u);
}

}  // namespace
}  // namespace pagoda::kv

namespace pagoda::kv {
namespace {

// A hybrid model resumes only at a block with a state snapshot: allocate's max_hit_blocks reuses
// that many leading cached blocks and computes the rest in fresh blocks, and blocks_needed agrees.
TEST(BlockManager, MaxHitBlocksCapsTheReusedPrefix) {
    BlockManager bm(16, 4);
    const auto prompt = iota_tokens(18);  // 4 reusable blocks
    ASSERT_EQ(bm.allocate(1, prompt).status, KvStatus::ok);
    bm.mark_computed(1, 18);
    const std::vector<uint64_t> hashes = bm.cached_prefix_hashes(prompt);
    ASSERT_EQ(hashes.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(bm.block_hash(1, i), hashes[i]);
        EXPECT_TRUE(bm.is_cached_hash(hashes[i]));
    }
    EXPECT_THROW(bm.block_hash(1, 4), Error);
    EXPECT_EQ(bm.blocks_needed(prompt, 0, true, 2), 5 - 2);  // 5 blocks, 2 of them shared (in use, so free)
    EXPECT_EQ(bm.blocks_needed(prompt, 0, true, 0), 5);
    auto r = bm.allocate(2, prompt, 0, true, 0, 2);
    ASSERT_EQ(r.status, KvStatus::ok);
    EXPECT_EQ(r.n_cached_tokens, 8);
    EXPECT_EQ(bm.block_table(2)[0], bm.block_table(1)[0]);
    EXPECT_EQ(bm.block_table(2)[1], bm.block_table(1)[1]);
    EXPECT_NE(bm.block_table(2)[2], bm.block_table(1)[2]);
    EXPECT_EQ(bm.stats().hit_tokens, 8);
    // Its recomputed blocks hash as the cached ones; the cache keeps the first copy.
    bm.mark_computed(2, 18);
    EXPECT_EQ(bm.block_hash(2, 3), hashes[3]);
    bm.free(1);
    bm.free(2);
    EXPECT_EQ(bm.cached_prefix_blocks(prompt), 4);
    auto all = bm.allocate(3, prompt, 0, true, 0, -1);
    EXPECT_EQ(all.n_cached_tokens, 16);
}

}  // namespace
}  // namespace pagoda::kv
