// A persistent pool of worker threads for data-parallel kernels. run(n, fn) calls fn(task, thread)
// for task in [0, n) across the caller plus the workers and returns when all are done. Workers (and
// the caller, waiting for them) spin briefly before blocking on a futex, because a decode step
// issues hundreds of short parallel regions and a wake-up per region would cost more than the work;
// the spin is bounded so an oversubscribed machine degrades gracefully. A region ends when all its
// tasks are done, not when every worker has checked in: on a busy machine a descheduled worker must
// not hold up a region the other threads already finished (it would cost a scheduler time slice per
// region, hundreds per decode step). Not re-entrant.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace pagoda {

class ThreadPool {
public:
    using Task = std::function<void(int task, int thread)>;

    explicit ThreadPool(int n_threads);  // n_threads >= 1 counts the calling thread
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    void run(int n_tasks, const Task& fn);

    // Splits [0, n) into contiguous ranges, one or more per thread, aligned to `grain`.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

    // For kernels that stream from memory (decode): [0, n_units) is split into one contiguous range
    // per thread, which its owner visits front to back in chunks of `chunk` units (one sequential
    // stream per core, what the hardware prefetchers follow; chunk <= 0: an eighth of a range, the
    // fewest that still balance well); a thread that runs out takes chunks
    // from the back of the others' ranges, so a core slowed for a moment does not hold the region
    // up. fn(begin, end, thread) runs once per chunk; every unit is visited exactly once, by
    // whichever thread, so a kernel whose units do not depend on each other gets the same result.
    // n_units < 2^31.
    void run_streams(int64_t n_units, const std::function<void(int64_t begin, int64_t end, int thread)>& fn,
                     int64_t chunk = 0);

private:
    void worker_loop(int thread_index);
    void drain(uint32_t region, int thread_index);

    int n_threads_;
    std::vector<std::thread> workers_;
    const Task* task_ = nullptr;
    std::atomic<int> n_tasks_{0};
    // (region number << 32) | next task index: a task is claimed by a compare-exchange that also
    // checks the region, so a worker still holding an earlier region's number claims nothing.
    std::atomic<uint64_t> work_{0};
    std::atomic<int> done_{0};              // tasks finished in the current region
    uint32_t region_ = 0;                   // written by the calling thread only
    std::atomic<uint64_t> generation_{0};   // bumped per region: what sleeping workers wait on
    std::atomic<bool> stop_{false};
    // run_streams' ranges, one per thread: (back << 32) | front, each on its own cache line.
    struct alignas(64) StreamRange {
        std::atomic<uint64_t> bounds{0};
    };
    std::vector<StreamRange> streams_;
};

// Physical cores (logical / SMT width), at most the CPUs of the affinity mask and of the cgroup's
// CPU limit (core/cpu_limit.h), at least 1.
int default_thread_count();

}  // namespace pagoda
