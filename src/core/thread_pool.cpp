#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <immintrin.h>
#include <set>
#include <string>

namespace pagoda {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::drain(int thread_index) {
    for (;;) {
        int t = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (t >= n_tasks_) break;
        (*task_)(t, thread_index);
    }
}

void ThreadPool::worker_loop(int thread_index) {
    uint64_t seen = 0;
    for (;;) {
        // Spin for a short while: the next parallel region usually follows within microseconds.
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < 20000) {
            _mm_pause();
            ++spins;
        }
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        drain(thread_index);
        pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::run(int n_tasks, const Task& fn) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    task_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    pending_workers_.store(int(workers_.size()), std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    wake_.notify_all();
    drain(0);
    while (pending_workers_.load(std::memory_order_acquire) != 0) _mm_pause();
    task_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    int64_t units = (n + grain - 1) / grain;
    int n_tasks = int(std::min<int64_t>(units, n_threads_));
    int64_t per = (units + n_tasks - 1) / n_tasks;
    run(n_tasks, [&](int task, int thread) {
        int64_t begin = task * per * grain;
        int64_t end = std::min(n, (task + 1) * per * grain);
        if (begin < end) fn(begin, end, thread);
    });
}

int default_thread_count() {
    // Count distinct (physical id, core id) pairs; fall back to the logical count.
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;
    std::string line, phys = "0";
    while (std::getline(in, line)) {
        auto value = [&] { auto p = line.find(':'); return p == std::string::npos ? std::string() : line.substr(p + 1); };
        if (line.rfind("physical id", 0) == 0) phys = value();
        else if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
    }
    int logical = int(std::max(1u, std::thread::hardware_concurrency()));
    if (cores.empty()) return logical;
    return std::clamp(int(cores.size()), 1, logical);
}

}  // namespace pagoda
