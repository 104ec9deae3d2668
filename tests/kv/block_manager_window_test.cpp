// BlockManager under a sliding window: mark_computed frees exactly the blocks wholly below the next
// token's window, the table keeps its length with kFreedBlock entries, the accounting invariant
// (free + evictable + used == n_blocks, ref count == entries naming a block) holds throughout, a
// long generation holds a bounded number of blocks, and fork / truncate / free / prefix caching skip
// the freed entries.
#include <gtest/gtest.h>
#include <map>
#include <numeric>

#include "core/error.h"
#include "kv/block_manager.h"

namespace pagoda::kv {
namespace {

void expect_invariants(const BlockManager& m) {
    EXPECT_EQ(m.num_free_blocks() + m.num_evictable_blocks() + m.num_used_blocks(), m.n_blocks());
    std::map<int32_t, int32_t> entries;
    for (SeqId s : m.sequences()) {
        const auto& table = m.block_table(s);
        for (size_t i = 0; i < table.size(); ++i) {
            if (int64_t(i) < m.num_freed_blocks(s)) {
                EXPECT_EQ(table[i], BlockManager::kFreedBlock);
                continue;
            }
            EXPECT_GE(table[i], 0);
            ++entries[table[i]];
        }
    }
    for (int32_t b = 0; b < m.n_blocks(); ++b) EXPECT_EQ(m.ref_count(b), entries[b]) << "block " << b;
}

std::vector<int32_t> tokens(int n, int32_t base = 1) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), base);
    return t;
}

TEST(BlockManagerWindow, FreesExactlyTheBlocksBelowTheWindow) {
    BlockManager m(32, 4, false);
    m.set_sliding_window(8);
    m.allocate(1, tokens(10));
    m.mark_computed(1, 10);  // next token at 10 reads 3..10: block 0 (0..3) still needed
    EXPECT_EQ(m.num_freed_blocks(1), 0);
    std::vector<BlockCopy> copies;
    m.append(1, tokens(2, 50), copies);
    m.mark_computed(1, 11);  // reads 4..11: block 0 is outside
    EXPECT_EQ(m.num_freed_blocks(1), 1);
    EXPECT_EQ(m.block_table(1)[0], BlockManager::kFreedBlock);
    EXPECT_EQ(m.block_table(1).size(), 3u);
    EXPECT_THROW(m.slot(1, 3), Error);
    EXPECT_NO_THROW(m.slot(1, 4));
    m.mark_computed(1, 12);  // reads 5..12: block 1 (4..7) is still needed
    EXPECT_EQ(m.num_freed_blocks(1), 1);
    expect_invariants(m);
}

TEST(BlockManagerWindow, LongGenerationHoldsBoundedBlocks) {
    for (int32_t bs : {1, 4, 16}) {
        for (int32_t window : {1, 7, 8, 33}) {
            BlockManager m(64, bs, true);
            m.set_sliding_window(window);
            m.allocate(1, tokens(5));
            m.mark_computed(1, 5);
            const int32_t bound = (window + bs - 1) / bs + 1;  // the window's blocks plus the next token's
            std::vector<BlockCopy> copies;
            for (int32_t i = 0; i < 1000; ++i) {
                ASSERT_TRUE(m.can_append(1, 1)) << "bs " << bs << " window " << window << " token " << i;
                m.append(1, std::vector<int32_t>{int32_t(i % 97)}, copies);
                EXPECT_LE(m.num_used_blocks(), bound) << "bs " << bs << " window " << window << " token " << i;
                m.mark_computed(1, m.num_tokens(1));
            }
            EXPECT_TRUE(copies.empty());
            EXPECT_EQ(int64_t(m.block_table(1).size()), (m.num_tokens(1) + bs - 1) / bs);
            expect_invariants(m);
            m.free(1);
            EXPECT_EQ(m.num_used_blocks(), 0);
            expect_invariants(m);
        }
    }
}

TEST(BlockManagerWindow, WithoutAWindowNothingIsFreed) {
    BlockManager m(64, 4, false);
    m.allocate(1, tokens(40));
    m.mark_computed(1, 40);
    EXPECT_EQ(m.num_freed_blocks(1), 0);
    EXPECT_EQ(m.num_used_blocks(), 10);
    EXPECT_THROW(m.set_sliding_window(-1), Error);
}

TEST(BlockManagerWindow, ForkTruncateAndPrefixCacheSkipFreedEntries) {
    BlockManager m(32, 4, true);
    m.set_sliding_window(4);
    m.allocate(1, tokens(17));
    m.mark_computed(1, 17);  // reads 14..17: blocks 0..2 (0..11) freed, published ones kept cached
    EXPECT_EQ(m.num_freed_blocks(1), 3);
    EXPECT_EQ(m.num_evictable_blocks(), 3);
    m.fork(1, 2);
    expect_invariants(m);
    std::vector<BlockCopy> copies;
    m.append(2, tokens(3, 90), copies);  // copy-on-write of the shared partial last block
    EXPECT_EQ(copies.size(), 1u);
    m.truncate(2, 18);
    expect_invariants(m);
    // A new prompt with the same first 16 tokens hits the cached blocks the window released.
    const auto hit = m.allocate(3, tokens(18));
    EXPECT_EQ(hit.n_cached_tokens, 16);
    expect_invariants(m);
    for (SeqId s : {1, 2, 3}) m.free(s);
    EXPECT_EQ(m.num_used_blocks(), 0);
    expect_invariants(m);
}

}  // namespace
}  // namespace pagoda::kv
