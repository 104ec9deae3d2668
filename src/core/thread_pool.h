// A persistent pool of worker threads for data-parallel kernels. run(n, fn) calls fn(task, thread)
// for task in [0, n) across the caller plus the workers and returns when all are done. Workers (and
// the caller, waiting for them) spin briefly before blocking on a futex, because a decode step
// issues hundreds of short parallel regions and a wake-up per region would cost more than the work;
// the spin is bounded so an oversubscribed machine degrades gracefully. Not re-entrant.
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

private:
    void worker_loop(int thread_index);
    void drain(int thread_index);

    int n_threads_;
    std::vector<std::thread> workers_;
    const Task* task_ = nullptr;
    int n_tasks_ = 0;
    std::atomic<int> next_task_{0};
    std::atomic<int> pending_workers_{0};
    std::atomic<uint64_t> generation_{0};
    std::atomic<bool> stop_{false};
};

int default_thread_count();  // physical cores (logical / SMT width), at least 1

}  // namespace pagoda
