// Measures this machine's physical limits in the same run as a benchmark (the host drifts):
// streaming-read memory bandwidth with every thread of the pool (the best of several access
// patterns, read_bandwidth.h), and the arithmetic peaks of the paths pagoda uses (fp32 FMA; int8
// dot products: vpdpbusd with AVX-512 VNNI, else the AVX2 vpmaddubsw sequence of the panel kernel;
// bf16 dot products where it has AVX-512 BF16; AMX int8 and bf16 tiles where they run). Benchmarks
// quote their figures as a fraction of these.
#pragma once
#include <cstdint>
#include <span>

#include "core/read_bandwidth.h"
#include "core/thread_pool.h"

namespace pagoda {

struct MachineLimits {
    double read_gbps = 0;          // GB/s (1e9 bytes/s), streaming read, all threads
    double fp32_gflops = 0;        // GFLOP/s, fused multiply-add (2 flops each), all threads
    double int8_gops = 0;          // GOP/s, int8 multiply-adds counted as 2 ops (VNNI, else AVX2); 0 on scalar
    double bf16_gflops = 0;        // GFLOP/s, vdpbf16ps products counted as 2 flops; 0 without AVX-512 BF16
    double amx_int8_gops = 0;      // GOP/s, tdpbssd multiply-adds counted as 2 ops; 0 where AMX int8 cannot run
    double amx_bf16_gflops = 0;    // GFLOP/s, tdpbf16ps products counted as 2 flops; 0 where AMX bf16 cannot run
};

// Each measurement takes a fraction of a second; `buffer_bytes` should exceed the last-level cache.
// Both read forms are the best of read_bandwidth.h's access patterns (measure_best_read_bandwidth
// says which pattern won).
double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t(1) << 30);
// The same over memory that already exists (e.g. a model's weights, which is what a decode step
// streams: its pages, their placement and their page size are the ones that matter; a fresh buffer
// measured here varied 2x between allocations on a shared host). Regions must be readable.
double measure_read_bandwidth(ThreadPool& pool, std::span<const std::span<const uint8_t>> regions);
double measure_fp32_fma_peak(ThreadPool& pool);
double measure_int8_dot_peak(ThreadPool& pool);
double measure_bf16_dot_peak(ThreadPool& pool);
// The AMX tile peaks (4 independent 16 x 16 x 64-byte products per iteration on every thread), where
// the hardware and the OS allow the tiles (PAGODA_AMX is not consulted: a limit of the machine).
double measure_amx_int8_peak(ThreadPool& pool);
double measure_amx_bf16_peak(ThreadPool& pool);
MachineLimits measure_machine_limits(ThreadPool& pool);
// Measures the arithmetic peaks again and keeps the higher of each: a peak is the machine's, so a
// lower figure only means the threads did not all run (a shared VM's vCPU away, or the kernel's own
// work right after a model load); `pagoda bench` calls it after its runs.
void raise_compute_peaks(MachineLimits& m, ThreadPool& pool);

}  // namespace pagoda
