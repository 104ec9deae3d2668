#include "core/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <gtest/gtest.h>
#include <algorithm>
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

TEST(ThreadPool, RunStreamsVisitsEveryUnitOnceInChunksOfAtMostTheChunk) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (int64_t n : {1, 2, 7, 64, 1000}) {
            for (int64_t chunk : {0, 1, 3, 16}) {
                std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                const int64_t limit = chunk > 0 ? chunk : std::max<int64_t>(1, n / (std::min<int64_t>(threads, n) * 8));
                pool.run_streams(n, [&](int64_t b, int64_t e, int thread) {
                    EXPECT_LT(b, e);
                    EXPECT_LE(e - b, limit);
                    EXPECT_GE(thread, 0);
                    EXPECT_LT(thread, threads);
                    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
                }, chunk);
                for (int64_t i = 0; i < n; ++i)
                    ASSERT_EQ(hits[size_t(i)].load(), 1) << threads << " threads, " << n << " units, unit " << i;
            }
        }
    }
}

TEST(ThreadPool, RunStreamsOwnersWalkFrontToBackAndAStalledThreadsRangeIsStolen) {
    // Two threads, 64 units in chunks of 4: the thread that takes the range of units 0..31 stalls on
    // its first chunk; the other finishes its own range front to back, then takes the stalled
    // range's chunks from its back, so the region does not wait for the stall.
    ThreadPool pool(2);
    std::mutex m;
    std::vector<std::pair<int64_t, int>> visits;  // (chunk begin, thread), in visiting order
    std::atomic<bool> stalled{false};
    pool.run_streams(64, [&](int64_t b, int64_t e, int thread) {
        EXPECT_EQ(e - b, 4);
        if (b == 0) {
            stalled = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        std::lock_guard<std::mutex> lock(m);
        visits.push_back({b, thread});
    }, 4);
    ASSERT_TRUE(stalled.load());
    ASSERT_EQ(visits.size(), 16u);
    int stalled_thread = -1;
    for (const auto& v : visits)
        if (v.first == 0) stalled_thread = v.second;
    std::vector<int64_t> other;
    for (const auto& v : visits)
        if (v.second != stalled_thread) other.push_back(v.first);
    // The other thread's own range first, in order, then the stalled range from its back.
    ASSERT_GE(other.size(), 8u + 6u) << "the stalled range was not stolen";
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(other[i], 32 + 4 * int64_t(i));
    for (size_t i = 8; i < other.size(); ++i) EXPECT_EQ(other[i], 28 - 4 * int64_t(i - 8));
}

}  // namespace pagoda
