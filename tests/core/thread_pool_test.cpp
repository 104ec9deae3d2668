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

TEST(ThreadPool, OversubscribedShortRegionsRunEachTaskOnceInItsRegion) {
    // More threads than cores and thousands of tiny regions: workers often wake late, after their
    // region has been finished by others. Each task must still run exactly once, in its own region
    // (a late worker must never run a task of a region that is over — its function and `hits` are
    // gone, which ASan reports — or a task of the next region a second time).
    ThreadPool pool(6);
    for (int round = 0; round < 4000; ++round) {
        const int n = 2 + round % 5;
        std::vector<std::atomic<int>> hits(n);
        pool.run(n, [&](int task, int) { hits[task].fetch_add(1); });
        for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round;
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
