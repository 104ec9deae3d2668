#include "core/thread_pool.h"

#include <atomic>
#include <gtest/gtest.h>
#include <vector>

namespace pagoda {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (int round = 0; round < 200; ++round) {
            int n = 1 + round % 37;
            std::vector<std::atomic<int>> hits(n);
            pool.run(n, [&](int task, int thread) {
                EXPECT_GE(thread, 0);
                EXPECT_LT(thread, threads);
                hits[task].fetch_add(1);
            });
            for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
        }
    }
}

TEST(ThreadPool, ParallelForCoversRangeWithGrain) {
    ThreadPool pool(2);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(1000, 16, [&](int64_t b, int64_t e, int) {
        EXPECT_EQ(b % 16, 0);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

}  // namespace pagoda
