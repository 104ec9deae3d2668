// snapshot_block_map: every block's use and owner, against a BlockManager driven through
// allocation, prefix sharing, fork and free.
#include "kv/block_map.h"

#include <gtest/gtest.h>
#include <numeric>

namespace pagoda::kv {
namespace {

std::vector<int32_t> tokens(int n, int start = 1) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), start);
    return t;
}

void expect_counts_match(const BlockMap& m, const BlockManager& bm) {
    EXPECT_EQ(m.n_blocks(), bm.n_blocks());
    EXPECT_EQ(m.n_free, bm.num_free_blocks());
    EXPECT_EQ(m.n_cached, bm.num_evictable_blocks());
    EXPECT_EQ(m.n_used, bm.num_used_blocks());
    EXPECT_EQ(m.n_free + m.n_cached + m.n_used, m.n_blocks());
}

TEST(BlockMap, EmptyPoolIsAllFree) {
    BlockManager bm(6, 4);
    const BlockMap m = snapshot_block_map(bm);
    EXPECT_EQ(m.block_size, 4);
    EXPECT_EQ(m.n_free, 6);
    for (int b = 0; b < 6; ++b) {
        EXPECT_EQ(m.use[size_t(b)], BlockUse::free);
        EXPECT_EQ(m.owner[size_t(b)], 0);
        EXPECT_EQ(m.holders[size_t(b)], 0);
    }
}

TEST(BlockMap, OwnersSharingAndCachedBlocks) {
    BlockManager bm(10, 4);
    ASSERT_EQ(bm.allocate(7, tokens(10)).status, KvStatus::ok);  // blocks for 10 tokens: 3
    bm.mark_computed(7, 10);                                      // two full blocks published
    // Sequence 9 shares the first 8 tokens (two full blocks) and adds its own.
    std::vector<int32_t> p = tokens(8);
    p.push_back(500);
    p.push_back(501);
    const auto r = bm.allocate(9, p);
    ASSERT_EQ(r.n_cached_tokens, 8);
    BlockMap m = snapshot_block_map(bm);
    expect_counts_match(m, bm);
    const std::vector<int32_t> t7 = bm.block_table(7);  // copies: the tables go with free()
    const std::vector<int32_t> t9 = bm.block_table(9);
    ASSERT_EQ(t7.size(), 3u);
    ASSERT_EQ(t9.size(), 3u);
    for (int i = 0; i < 2; ++i) {  // shared prefix blocks: two holders, owner the lower id
        EXPECT_EQ(t9[size_t(i)], t7[size_t(i)]);
        EXPECT_EQ(m.use[size_t(t7[size_t(i)])], BlockUse::used);
        EXPECT_EQ(m.holders[size_t(t7[size_t(i)])], 2);
        EXPECT_EQ(m.owner[size_t(t7[size_t(i)])], 7);
    }
    EXPECT_EQ(m.owner[size_t(t7[2])], 7);
    EXPECT_EQ(m.holders[size_t(t7[2])], 1);
    EXPECT_EQ(m.owner[size_t(t9[2])], 9);
    EXPECT_EQ(m.n_used, 4);

    // Freeing both leaves the two published blocks cached (evictable), the tails free.
    bm.free(7);
    m = snapshot_block_map(bm);
    expect_counts_match(m, bm);
    EXPECT_EQ(m.owner[size_t(t7[0])], 9);  // now held by 9 alone
    EXPECT_EQ(m.holders[size_t(t7[0])], 1);
    bm.free(9);
    m = snapshot_block_map(bm);
    expect_counts_match(m, bm);
    EXPECT_EQ(m.n_used, 0);
    EXPECT_EQ(m.n_cached, 2);
    EXPECT_EQ(m.use[size_t(t7[0])], BlockUse::cached);
    EXPECT_EQ(m.use[size_t(t7[1])], BlockUse::cached);
    EXPECT_EQ(m.owner[size_t(t7[0])], 0);
}

TEST(BlockMap, ForkSharesEveryBlock) {
    BlockManager bm(8, 2);
    bm.allocate(1, tokens(5));
    bm.mark_computed(1, 5);
    bm.fork(1, 2);
    const BlockMap m = snapshot_block_map(bm);
    expect_counts_match(m, bm);
    for (int32_t b : bm.block_table(1)) {
        EXPECT_EQ(m.holders[size_t(b)], 2);
        EXPECT_EQ(m.owner[size_t(b)], 1);
    }
}

}  // namespace
}  // namespace pagoda::kv
