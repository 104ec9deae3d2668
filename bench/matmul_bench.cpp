// matmul throughput per weight type and path at the shapes of the `small` (dim 768, ffn 2048,
// vocab 32000) and `tinyllama` (dim 2048, ffn 5632) presets. Counters: GB/s = weight bytes streamed
// per second (decode, n_tokens = 1), GFLOP/s = 2*rows*cols*n_tokens per second (prefill, 64 tokens;
// the packed `small` ffn also at 17 and 32, the first step sizes of the AVX-512 wide prefill kernel).
// Paths: set PAGODA_ISA / PAGODA_QUANT_METHOD in the environment to compare; PAGODA_BENCH_THREADS sets
// the pool size; PAGODA_AMX=0/1 compares the VNNI panels with the AMX tiles (512 tokens: a prefill step).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "gguf/ggml_types.h"
#include "backend/cpu/matmul/matmul.h"
#include "quant/quantize.h"

namespace {

using pagoda::gguf::GgmlType;

struct Weights {
    std::vector<uint8_t> bytes;
    pagoda::backend::cpu::WeightView view;
};

Weights make(GgmlType type, int64_t rows, int64_t cols) {
    Weights w;
    const uint64_t rb = *pagoda::gguf::row_size(type, cols);
    w.bytes.resize(rb * uint64_t(rows));
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 0.5f);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = nd(rng);
        uint8_t* out = w.bytes.data() + r * int64_t(rb);
        if (type == GgmlType::F32) std::memcpy(out, row.data(), rb);
        else if (type == GgmlType::F16 || type == GgmlType::BF16) {
            for (int64_t c = 0; c < cols; ++c) {
                uint16_t h = type == GgmlType::F16 ? pagoda::f32_to_f16(row[size_t(c)]) : pagoda::f32_to_bf16(row[size_t(c)]);
                std::memcpy(out + 2 * c, &h, 2);
            }
        } else if (type == GgmlType::Q5_K) {
            for (uint64_t i = 0; i < rb; ++i) out[i] = uint8_t(rng());
            for (uint64_t sb = 0; sb < rb / 176; ++sb) { uint16_t d = 0x1800; std::memcpy(out + sb * 176, &d, 2); std::memcpy(out + sb * 176 + 2, &d, 2); }
        } else {
            pagoda::quant::quantize_row(type, row.data(), out, cols);
        }
    }
    w.view = {type, w.bytes.data(), rows, cols};
    return w;
}

pagoda::ThreadPool& pool() {
    // PAGODA_BENCH_THREADS=1 gives a per-thread figure whose CPU time is meaningful on a busy machine.
    static pagoda::ThreadPool p([] {
        const char* env = std::getenv("PAGODA_BENCH_THREADS");
        return env && std::atoi(env) > 0 ? std::atoi(env) : pagoda::default_thread_count();
    }());
    return p;
}

void run(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols) {
    const int64_t n = state.range(0);
    auto w = make(type, rows, cols);
    std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
    for (auto _ : state) {
        pagoda::backend::cpu::matmul(w.view, x.data(), n, y.data(), pool());
        benchmark::ClobberMemory();
    }
    const double iters = double(state.iterations());
    state.counters["GB/s"] = benchmark::Counter(double(w.bytes.size()) * iters / 1e9, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(rows) * double(cols) * double(n) * iters / 1e9,
                                                   benchmark::Counter::kIsRate);
}

// The same through PackedWeight (repacked once, outside the timing).
void run_packed(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols) {
    const int64_t n = state.range(0);
    auto w = make(type, rows, cols);
    const auto packed = pagoda::backend::cpu::pack_weight(w.view);
    std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
    for (auto _ : state) {
        pagoda::backend::cpu::matmul(packed, x.data(), n, y.data(), pool());
        benchmark::ClobberMemory();
    }
    const double iters = double(state.iterations());
    state.counters["GB/s"] = benchmark::Counter(double(w.bytes.size()) * iters / 1e9, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(rows) * double(cols) * double(n) * iters / 1e9,
                                                   benchmark::Counter::kIsRate);
}

#define PAGODA_PACKED_BENCH(TYPE)                                                                              \
    void BM_packed_small_ffn_##TYPE(benchmark::State& s) { run_packed(s, GgmlType::TYPE, 2048, 768); }        \
    void BM_packed_small_vocab_##TYPE(benchmark::State& s) { run_packed(s, GgmlType::TYPE, 32000, 768); }     \
    void BM_packed_tinyllama_ffn_##TYPE(benchmark::State& s) { run_packed(s, GgmlType::TYPE, 5632, 2048); }   \
    BENCHMARK(BM_packed_small_ffn_##TYPE)->Arg(1)->Arg(17)->Arg(32)->Arg(64)->Arg(512)->UseRealTime(); \
    BENCHMARK(BM_packed_small_vocab_##TYPE)->Arg(1)->UseRealTime();                                            \
    BENCHMARK(BM_packed_tinyllama_ffn_##TYPE)->Arg(1)->Arg(64)->UseRealTime();

PAGODA_PACKED_BENCH(Q8_0)
PAGODA_PACKED_BENCH(Q4_0)
PAGODA_PACKED_BENCH(Q4_K)
PAGODA_PACKED_BENCH(Q5_K)
PAGODA_PACKED_BENCH(Q6_K)
// F16 packs as the float method at packing time says (PAGODA_FLOAT_METHOD: bf16_dot panels, amx_bf16
// tiles; f32_fma keeps the view).
PAGODA_PACKED_BENCH(F16)

#define PAGODA_MATMUL_BENCH(TYPE)                                                                          \
    void BM_matmul_small_ffn_##TYPE(benchmark::State& s) { run(s, GgmlType::TYPE, 2048, 768); }           \
    void BM_matmul_small_vocab_##TYPE(benchmark::State& s) { run(s, GgmlType::TYPE, 32000, 768); }        \
    void BM_matmul_tinyllama_ffn_##TYPE(benchmark::State& s) { run(s, GgmlType::TYPE, 5632, 2048); }      \
    void BM_matmul_tinyllama_down_##TYPE(benchmark::State& s) { run(s, GgmlType::TYPE, 2048, 5632); }     \
    BENCHMARK(BM_matmul_small_ffn_##TYPE)->Arg(1)->Arg(64)->Arg(512)->UseRealTime();                       \
    BENCHMARK(BM_matmul_small_vocab_##TYPE)->Arg(1)->UseRealTime();                                        \
    BENCHMARK(BM_matmul_tinyllama_ffn_##TYPE)->Arg(1)->Arg(64)->UseRealTime();                             \
    BENCHMARK(BM_matmul_tinyllama_down_##TYPE)->Arg(1)->UseRealTime();

PAGODA_MATMUL_BENCH(F32)
PAGODA_MATMUL_BENCH(F16)
PAGODA_MATMUL_BENCH(BF16)
PAGODA_MATMUL_BENCH(Q8_0)
PAGODA_MATMUL_BENCH(Q4_0)
PAGODA_MATMUL_BENCH(Q4_K)
PAGODA_MATMUL_BENCH(Q5_K)
PAGODA_MATMUL_BENCH(Q6_K)

// Streaming read bandwidth with the pool's threads (the decode bound): sums a 256 MiB buffer.
void BM_kernels_stream_read(benchmark::State& state) {
    const size_t n = size_t(256) << 20 >> 2;
    static std::vector<float> buf(n, 1.f);
    const int threads = pool().size();
    std::vector<double> part(size_t(threads) * 8);
    for (auto _ : state) {
        pool().run(threads, [&](int task, int) {
            const size_t b = n / size_t(threads) * size_t(task), e = n / size_t(threads) * size_t(task + 1);
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
            for (size_t i = b; i < e; i += 8) {
                a0 += buf[i]; a1 += buf[i + 1]; a2 += buf[i + 2]; a3 += buf[i + 3];
                a4 += buf[i + 4]; a5 += buf[i + 5]; a6 += buf[i + 6]; a7 += buf[i + 7];
            }
            part[size_t(task) * 8] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
        });
        benchmark::DoNotOptimize(part.data());
    }
    state.counters["GB/s"] = benchmark::Counter(double(n * 4) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_kernels_stream_read)->UseRealTime();

}  // namespace
