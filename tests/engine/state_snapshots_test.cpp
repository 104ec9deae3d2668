// StateSnapshots: the bookkeeping of a hybrid model's prefix-cache state snapshots. Slots come from
// the given list, a hash has at most one, a full set replaces its least recently used (a restore
// counts as a use), and dropping one (its block was evicted) frees its slot.
#include "engine/state_snapshots.h"

#include <gtest/gtest.h>

namespace pagoda::engine {
namespace {

TEST(StateSnapshots, TakesFindsReplacesLeastRecentlyUsedAndDrops) {
    StateSnapshots none({});
    EXPECT_EQ(none.capacity(), 0);
    EXPECT_EQ(none.take(1), -1);

    StateSnapshots s({7, 8});
    EXPECT_EQ(s.capacity(), 2);
    const int32_t a = s.take(100), b = s.take(200);
    EXPECT_NE(a, b);
    EXPECT_TRUE((a == 7 || a == 8) && (b == 7 || b == 8));
    EXPECT_EQ(s.take(100), -1);  // already held
    EXPECT_EQ(s.find(100), a);
    EXPECT_EQ(s.find(300), -1);
    s.touch(100);  // 200 is now the least recently used
    EXPECT_EQ(s.restored(), 1);
    EXPECT_EQ(s.take(300), b);
    EXPECT_EQ(s.find(200), -1);
    EXPECT_EQ(s.find(100), a);
    EXPECT_EQ(s.size(), 2);
    EXPECT_EQ(s.taken(), 3);
    s.drop(100);
    s.drop(999);  // unknown: nothing
    EXPECT_EQ(s.size(), 1);
    EXPECT_EQ(s.take(400), a);  // the dropped one's slot
    s.clear();
    EXPECT_EQ(s.size(), 0);
    EXPECT_EQ(s.find(300), -1);
    EXPECT_NE(s.take(500), -1);
}

}  // namespace
}  // namespace pagoda::engine
