// Decode-shaped matmul (1, 2, 4, 8, 16 tokens) through PackedWeight, per weight type and thread count,
// beside the streaming-read bound measured in the same run over the same memory:
//   BM_decode_<TYPE>/<tokens>/<threads>/<resident>
// resident = 0: round-robin over 64 matrices of 4 MiB each (256 MiB of weights, far beyond any L3 of
// the machines seen), so every call streams its weights from memory; the counter read_GB/s is the
// streaming-read bound of those same 256 MiB with the same pool, taken right before the timing: the
// larger of measure_best_read_bandwidth (core/read_bandwidth.h: the best of its access patterns) and
// the fastest call of the winning pattern's read loop over one matrix (see best_call_read_gbps). resident = 1: one 1 MiB matrix (L2 of one core, L3 of any),
// which shows the kernel's compute ceiling (read_GB/s is then the cached read rate of that MiB).
// Counters: GB/s = weight bytes per second (all threads) of the fastest call, as the read bound is
// the fastest of its rounds (on a shared machine the mean, mean_GB/s, also counts other processes'
// time slices); GB/s/core = GB/s / threads; of_bound = GB/s / read_GB/s.
// Matrices are 2048 columns wide (tinyllama's width), and for one token from memory also 768 (the
// `small` preset's: a kernel call then covers fewer bytes, so a fixed per-call cost shows); weight
// values are copies of one quantised random block of rows (content does not change the speed of
// these kernels). Names end in /cols:N.
// Run: build with -DPAGODA_BENCH=ON, then
//   build/bench/pagoda_bench --benchmark_filter=BM_decode_ --benchmark_min_time=0.3
// or bench/run_decode_bench.sh, which prints the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <ctime>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/matmul/matmul.h"
#include "core/half.h"
#include "core/read_bandwidth.h"
#include "core/thread_pool.h"
#include "gguf/ggml_types.h"
#include "quant/quantize.h"

namespace {

using pagoda::gguf::GgmlType;
constexpr int kBigMatrices = 64;
constexpr size_t kBigBytes = size_t(4) << 20;   // per matrix: a call lasts well under a time slice
constexpr size_t kResidentBytes = size_t(1) << 20;

pagoda::ThreadPool& pool(int threads) {
    static pagoda::ThreadPool one(1), two(2);
    return threads == 1 ? one : two;
}

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

namespace {

// The read bound the way the kernel is timed: each region in turn split over the pool's threads, the
// fastest call kept (measure_read_bandwidth times whole passes over all regions, which on a shared
// machine include other processes' time slices). The larger of the two is the bound quoted.
double best_call_read_gbps(pagoda::ThreadPool& p, const std::vector<std::span<const uint8_t>>& regions,
                           const pagoda::ReadPattern& pattern) {
    double best = 1e30;
    std::vector<uint64_t> sink(size_t(p.size()));
    for (int round = 0; round < 3; ++round)
        for (const auto& r : regions) {
            const size_t per = r.size() / size_t(p.size()) / 64 * 64;
            const auto t0 = std::chrono::steady_clock::now();
            p.run(p.size(), [&](int task, int) { sink[size_t(task)] += pagoda::read_sum(r.data() + per * size_t(task), per, pattern); });
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                                      double(per * size_t(p.size())));
        }
    benchmark::DoNotOptimize(sink.data());
    return 1.0 / best / 1e9;
}

// A row of a grid type pagoda does not quantise to (IQ2_XXS, IQ3_S, ...): random codes, with each
// block's leading f16 scale set to 1/16 so no block holds an infinity, a NaN or a subnormal scale
// (the kernels' speed does not depend on the codes; a subnormal could). Only for the types whose
// block starts with its f16 scale (IQ1_M keeps it in its scale bits; refused here).
void random_grid_row(GgmlType type, std::mt19937& rng, uint8_t* p, int64_t cols) {
    const auto& t = pagoda::gguf::type_traits(type);
    const bool leading_scale = type == GgmlType::IQ2_XXS || type == GgmlType::IQ2_XS || type == GgmlType::IQ2_S ||
                               type == GgmlType::IQ3_XXS || type == GgmlType::IQ3_S || type == GgmlType::IQ1_S;
    if (!leading_scale) throw std::runtime_error(std::string("decode bench: no random rows for ") + t.name);
    const uint16_t sixteenth = pagoda::f32_to_f16(0.0625f);
    for (int64_t b = 0; b < cols / t.block_size; ++b) {
        uint8_t* block = p + b * t.type_size;
        for (int64_t i = 0; i < t.type_size; ++i) block[i] = uint8_t(rng());
        std::memcpy(block, &sixteenth, 2);
    }
}

// One row block of random values quantised to `type` (or stored as F32 / F16 / BF16, or random
// codes of a grid type: random_grid_row), `rows` rows.
std::vector<uint8_t> seed_rows(GgmlType type, int64_t rows, int64_t cols) {
    const uint64_t rb = *pagoda::gguf::row_size(type, cols);
    std::vector<uint8_t> out(rb * uint64_t(rows));
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 0.5f);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = nd(rng);
        uint8_t* p = out.data() + r * int64_t(rb);
        if (type == GgmlType::F32) std::memcpy(p, row.data(), rb);
        else if (type == GgmlType::F16)
            for (int64_t c = 0; c < cols; ++c) {
                const uint16_t h = pagoda::f32_to_f16(row[size_t(c)]);
                std::memcpy(p + 2 * c, &h, 2);
            }
        else if (type == GgmlType::BF16)
            for (int64_t c = 0; c < cols; ++c) {
                const uint16_t h = pagoda::f32_to_bf16(row[c]);
                std::memcpy(p + 2 * c, &h, 2);
            }
        else if (pagoda::quant::can_quantize(type)) pagoda::quant::quantize_row(type, row.data(), p, cols);
        else random_grid_row(type, rng, p, cols);
    }
    return out;
}

struct Matrix {
    std::vector<uint8_t> bytes;
    pagoda::backend::cpu::PackedWeight packed;
};

struct Set {
    std::vector<std::unique_ptr<Matrix>> m;
    size_t weight_bytes = 0;  // of one matrix, as GGUF stores it
};

// Matrices of `type`, kept while consecutive benchmarks use the same (type, resident, cols).
Set& matrices(GgmlType type, bool resident, int64_t cols) {
    static std::map<std::tuple<int, bool, int64_t>, Set> cache;
    const auto key = std::make_tuple(int(type), resident, cols);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    cache.clear();  // frees the previous type's 2 x 256 MiB before building the next
    const uint64_t rb = *pagoda::gguf::row_size(type, cols);
    const int64_t rows = int64_t((resident ? kResidentBytes : kBigBytes) / rb) / 8 * 8;
    const std::vector<uint8_t> seed = seed_rows(type, 64, cols);
    Set& s = cache[key];
    for (int i = 0; i < (resident ? 1 : kBigMatrices); ++i) {
        auto m = std::make_unique<Matrix>();
        m->bytes.resize(rb * uint64_t(rows));
        for (size_t off = 0; off < m->bytes.size(); off += seed.size())
            std::memcpy(m->bytes.data() + off, seed.data(), std::min(seed.size(), m->bytes.size() - off));
        m->packed = pagoda::backend::cpu::pack_weight({type, m->bytes.data(), rows, cols});
        s.m.push_back(std::move(m));
    }
    s.weight_bytes = rb * uint64_t(rows);
    return s;
}

// The bytes a call reads: the packed panels where the weight is packed, else the source view.
std::span<const uint8_t> read_region(const Matrix& m) {
    if (m.packed.is_packed()) return {m.packed.data(), m.packed.packed_bytes()};
    return {m.bytes.data(), m.bytes.size()};
}

void run(benchmark::State& state, GgmlType type) {
    const int64_t n = state.range(0);
    const int threads = int(state.range(1));
    const bool resident = state.range(2) != 0;
    const int64_t cols = state.range(3);
    Set& s = matrices(type, resident, cols);
    pagoda::ThreadPool& p = pool(threads);
    std::vector<std::span<const uint8_t>> regions;
    for (const auto& m : s.m) regions.push_back(read_region(*m));
    const pagoda::ReadBandwidth best_pattern = pagoda::measure_best_read_bandwidth(p, regions);
    const double read_gbps = std::max(best_pattern.gbps, best_call_read_gbps(p, regions, best_pattern.pattern));
    std::vector<float> x(size_t(n * cols)), y(size_t(n) * s.m[0]->packed.source().rows);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> ud(-1.f, 1.f);
    for (auto& v : x) v = ud(rng);
    size_t i = 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    double best = 1e30;  // fastest call: what the kernel does when no other process takes the core
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        pagoda::backend::cpu::matmul(s.m[i]->packed, x.data(), n, y.data(), p);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        i = (i + 1) % s.m.size();
        benchmark::ClobberMemory();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double gbps = double(s.weight_bytes) * double(state.iterations()) / seconds / 1e9;
    const double best_gbps = double(s.weight_bytes) / best / 1e9;
    state.counters["mean_GB/s"] = gbps;
    state.counters["GB/s"] = best_gbps;
    state.counters["GB/s/core"] = best_gbps / threads;
    state.counters["read_GB/s"] = read_gbps;
    state.counters["of_bound"] = best_gbps / read_gbps;
    // On one thread the work runs on this thread: bytes per second of its CPU time is the kernel's
    // rate even while other processes share the cores (wall-clock figures are then disturbed).
    if (threads == 1)
        state.counters["cpu_GB/s"] =
            double(s.weight_bytes) * double(state.iterations()) / (thread_cpu_seconds() - cpu_start) / 1e9;
}

void args(benchmark::internal::Benchmark* b) {
    for (int resident : {0, 1})
        for (int threads : {1, 2})
            for (int tokens : {1, 2, 4, 8, 16}) b->Args({tokens, threads, resident, 2048});
    for (int threads : {1, 2}) b->Args({1, threads, 0, 768});
    b->ArgNames({"tokens", "threads", "resident", "cols"})->UseRealTime();
}

#define PAGODA_DECODE_BENCH(TYPE)                                                \
    void BM_decode_##TYPE(benchmark::State& s) { run(s, GgmlType::TYPE); }      \
    BENCHMARK(BM_decode_##TYPE)->Apply(args);

PAGODA_DECODE_BENCH(F32)
PAGODA_DECODE_BENCH(F16)
PAGODA_DECODE_BENCH(Q8_0)
PAGODA_DECODE_BENCH(Q4_0)
PAGODA_DECODE_BENCH(Q4_1)
PAGODA_DECODE_BENCH(Q5_0)
PAGODA_DECODE_BENCH(Q4_K)
PAGODA_DECODE_BENCH(Q5_K)
PAGODA_DECODE_BENCH(Q6_K)
PAGODA_DECODE_BENCH(BF16)
// The 2026 files' types (issue 46's figure): quantised as pagoda quantises them, IQ2_XXS as random codes.
PAGODA_DECODE_BENCH(IQ4_NL)
PAGODA_DECODE_BENCH(IQ4_XS)
PAGODA_DECODE_BENCH(MXFP4)
PAGODA_DECODE_BENCH(IQ2_XXS)

}  // namespace
