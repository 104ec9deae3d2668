#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <immintrin.h>
#include <set>
#include <string>

#include "core/cpu_limit.h"

namespace pagoda {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::drain(uint32_t region, int thread_index) {
    for (;;) {
        uint64_t w = work_.load(std::memory_order_acquire);
        if (uint32_t(w >> 32) != region) return;
        const int64_t t = int64_t(uint32_t(w));
        const int n = n_tasks_.load(std::memory_order_relaxed);
        if (t >= n) return;
        if (!work_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) continue;
        // The claim succeeded for this region, so the region is still open and task_ is its task.
        (*task_)(int(t), thread_index);
        if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) done_.notify_one();
    }
}

namespace {
// Spin this many pause instructions (tens of microseconds) before blocking: long enough to catch the
// next parallel region of a decode step, short enough not to burn a core that another process (or a
// descheduled sibling) needs when the machine is oversubscribed.
constexpr int kSpinIterations = 4096;
}  // namespace

void ThreadPool::worker_loop(int thread_index) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = generation_.load(std::memory_order_acquire);
        for (int spins = 0; g == seen && spins < kSpinIterations; ++spins) {
            _mm_pause();
            g = generation_.load(std::memory_order_acquire);
        }
        while (g == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            g = generation_.load(std::memory_order_acquire);
        }
        seen = g;
        if (stop_.load()) return;
        drain(uint32_t(work_.load(std::memory_order_acquire) >> 32), thread_index);
    }
}

void ThreadPool::run(int n_tasks, const Task& fn) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    task_ = &fn;
    n_tasks_.store(n_tasks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    ++region_;
    work_.store(uint64_t(region_) << 32, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    drain(region_, 0);
    int done = done_.load(std::memory_order_acquire);
    for (int spins = 0; done != n_tasks && spins < kSpinIterations; ++spins) {
        _mm_pause();
        done = done_.load(std::memory_order_acquire);
    }
    while (done != n_tasks) {
        done_.wait(done, std::memory_order_acquire);
        done = done_.load(std::memory_order_acquire);
    }
    // Close the region before the next one rewrites task_ and n_tasks_: a worker that still reads
    // this region's number then finds no task to claim (and a claim it prepared earlier fails).
    work_.store((uint64_t(region_) << 32) | 0x7fffffffu, std::memory_order_relaxed);
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

namespace {

// Claims up to `chunk` units from the front (owner) or the back (a thief) of a range; false when
// it is empty.
bool claim(std::atomic<uint64_t>& bounds, int64_t chunk, bool front, int64_t& begin, int64_t& end) {
    uint64_t v = bounds.load(std::memory_order_acquire);
    for (;;) {
        const uint32_t lo = uint32_t(v), hi = uint32_t(v >> 32);
        if (lo >= hi) return false;
        const uint32_t take = uint32_t(std::min<int64_t>(chunk, int64_t(hi - lo)));
        const uint64_t next = front ? (uint64_t(hi) << 32) | (lo + take) : (uint64_t(hi - take) << 32) | lo;
        if (bounds.compare_exchange_weak(v, next, std::memory_order_acq_rel)) {
            begin = front ? lo : hi - take;
            end = front ? lo + take : hi;
            return true;
        }
    }
}

}  // namespace

void ThreadPool::run_streams(int64_t n_units, const std::function<void(int64_t, int64_t, int)>& fn, int64_t chunk) {
    if (n_units <= 0) return;
    const int n = int(std::min<int64_t>(n_threads_, n_units));
    if (chunk <= 0) chunk = n_units / (int64_t(n) * 8);
    chunk = std::max<int64_t>(1, chunk);
    if (n == 1) {
        for (int64_t b = 0; b < n_units; b += chunk) fn(b, std::min(n_units, b + chunk), 0);
        return;
    }
    if (int(streams_.size()) < n) streams_ = std::vector<StreamRange>(size_t(n));
    for (int i = 0; i < n; ++i) {
        const uint64_t lo = uint64_t(n_units * i / n), hi = uint64_t(n_units * (i + 1) / n);
        streams_[size_t(i)].bounds.store((hi << 32) | lo, std::memory_order_relaxed);
    }
    // Task i owns range i; tasks are claimed in turn, so each thread usually runs one. Stolen
    // chunks come from the next ranges first (the nearest neighbour's tail).
    run(n, [&](int task, int thread) {
        int64_t b, e;
        while (claim(streams_[size_t(task)].bounds, chunk, true, b, e)) fn(b, e, thread);
        for (int k = 1; k < n; ++k) {
            std::atomic<uint64_t>& victim = streams_[size_t((task + k) % n)].bounds;
            while (claim(victim, chunk, false, b, e)) fn(b, e, thread);
        }
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
    int n = cores.empty() ? logical : std::clamp(int(cores.size()), 1, logical);
    // Inside a container the machine's cores are not ours: cap by the affinity mask and the
    // cgroup's CPU limit (core/cpu_limit.h).
    if (int affinity = affinity_cpu_count(); affinity > 0) n = std::min(n, affinity);
    if (int limit = cgroup_cpu_limit(); limit > 0) n = std::min(n, limit);
    return std::max(1, n);
}

}  // namespace pagoda
