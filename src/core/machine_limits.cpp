#include "core/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cpu_features.h"

namespace pagoda {

// Defined in machine_limits_avx2.cpp / machine_limits_avx512.cpp (compiled with those ISAs).
double fma_chain_avx2(int64_t iterations);
int64_t maddubs_chain_avx2(int64_t iterations);
double fma_chain_avx512(int64_t iterations);
int64_t vnni_chain_avx512(int64_t iterations);
double bf16_dot_chain_avx512(int64_t iterations);
double amx_int8_chain(int64_t iterations);  // machine_limits_amx.cpp
double amx_bf16_chain(int64_t iterations);

namespace {

using Clock = std::chrono::steady_clock;

// The pool hands tasks to whichever thread is free, so a late-waking worker could leave the
// caller running two shares in a row and halve the measured rate. The work is therefore cut into
// many small tasks (kTasksPerThread per thread) so every thread stays busy until the end.
constexpr int kTasksPerThread = 16;

// Runs fn(task) for every task of a round, `reps` rounds, and returns the best wall time of one round.
template <class Fn>
double best_parallel_seconds(ThreadPool& pool, int n_tasks, int reps, Fn fn) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        auto start = Clock::now();
        pool.run(n_tasks, [&](int task, int) { fn(task); });
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return best;
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes) {
    const ReadScratch scratch(buffer_bytes);
    const std::span<const uint8_t> region = scratch.bytes();
    return measure_best_read_bandwidth(pool, std::span(&region, 1)).gbps;
}

double measure_read_bandwidth(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions) {
    return measure_best_read_bandwidth(pool, regions).gbps;
}

namespace {

// Giga-operations per second of `chain(iterations)` run as many small tasks on every thread, each
// iteration counting ops_per_iteration (a multiply-add as 2).
template <class Chain>
double chain_rate(ThreadPool& pool, int64_t iterations, double ops_per_iteration, Chain chain) {
    const int n = pool.size() * kTasksPerThread;
    std::vector<double> sink(static_cast<size_t>(n));
    // Seven rounds (~60 ms) rather than three: on a shared VM one vCPU was sometimes away for all of
    // three back-to-back rounds (Ice Lake guest: fp32 175 against 320 GFLOP/s, int8 710 against
    // 1 240 GOP/s, in 4 of 8 `pagoda bench` runs), and the best round is the machine's peak.
    const double seconds = best_parallel_seconds(pool, n, 7, [&](int task) { sink[size_t(task)] = double(chain(iterations)); });
    return double(iterations) * ops_per_iteration * n / seconds / 1e9;
}

}  // namespace

double measure_fp32_fma_peak(ThreadPool& pool) {
    const Isa isa = active_isa();
    if (isa == Isa::scalar) return 0;
    // Each iteration: 12 independent FMA vectors of 16 (AVX-512) or 8 (AVX2) lanes, 2 flops per lane.
    const double lanes = isa == Isa::avx512 ? 16 : 8;
    return chain_rate(pool, 250'000, 12 * lanes * 2, isa == Isa::avx512 ? fma_chain_avx512 : fma_chain_avx2);
}

double measure_int8_dot_peak(ThreadPool& pool) {
    if (active_isa() == Isa::scalar) return 0;
    // Each iteration: 12 vpdpbusd of 64 int8 products, each product a multiply and an add.
    if (active_isa() == Isa::avx512 && cpu_features().avx512vnni) return chain_rate(pool, 250'000, 12 * 64 * 2, vnni_chain_avx512);
    // Without VNNI, the AVX2 panel kernel's sequence: 8 vpmaddubsw of 32 products (+ adds, 2 vpmaddwd).
    return chain_rate(pool, 375'000, 8 * 32 * 2, maddubs_chain_avx2);
}

double measure_bf16_dot_peak(ThreadPool& pool) {
    if (active_isa() != Isa::avx512 || !cpu_features().avx512bf16) return 0;
    // Each iteration: 12 vdpbf16ps of 32 bf16 products, each product a multiply and an add.
    return chain_rate(pool, 250'000, 12 * 32 * 2, bf16_dot_chain_avx512);
}

double measure_amx_int8_peak(ThreadPool& pool) {
    if (!amx_hardware_available()) return 0;
    // Each iteration: 4 tile products of 16 x 16 x 64 int8 multiply-adds, 2 ops each.
    return chain_rate(pool, 20'000, 4 * 16 * 16 * 64 * 2, amx_int8_chain);
}

double measure_amx_bf16_peak(ThreadPool& pool) {
    if (!amx_bf16_hardware_available()) return 0;
    // Each iteration: 4 tile products of 16 x 16 x 32 bf16 multiply-adds, 2 flops each.
    return chain_rate(pool, 20'000, 4 * 16 * 16 * 32 * 2, amx_bf16_chain);
}

MachineLimits measure_machine_limits(ThreadPool& pool) {
    MachineLimits m;
    m.read_gbps = measure_read_bandwidth(pool);
    m.fp32_gflops = measure_fp32_fma_peak(pool);
    m.int8_gops = measure_int8_dot_peak(pool);
    m.bf16_gflops = measure_bf16_dot_peak(pool);
    m.amx_int8_gops = measure_amx_int8_peak(pool);
    m.amx_bf16_gflops = measure_amx_bf16_peak(pool);
    return m;
}

void raise_compute_peaks(MachineLimits& m, ThreadPool& pool) {
    m.fp32_gflops = std::max(m.fp32_gflops, measure_fp32_fma_peak(pool));
    m.int8_gops = std::max(m.int8_gops, measure_int8_dot_peak(pool));
    m.bf16_gflops = std::max(m.bf16_gflops, measure_bf16_dot_peak(pool));
    m.amx_int8_gops = std::max(m.amx_int8_gops, measure_amx_int8_peak(pool));
    m.amx_bf16_gflops = std::max(m.amx_bf16_gflops, measure_amx_bf16_peak(pool));
}

}  // namespace pagoda
