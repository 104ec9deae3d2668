// The CPU LoRA update (backend/cpu/lora/lora_add.h) of one decode step at scripts/bench_lora.sh's
// shapes: 4 layers of dim 1024, ffn 2816, rank-16 adapters on all seven projections, 16 rows, the
// projections grouped as the fused ops call them (Q|K|V in one call, O, gate|up in one call, down).
// Args: adapters in the step (1: one segment of 16 rows; 16: sixteen segments of one row each) and
// the number type (0 f32, 1 bf16). Counters: GB/s = adapter bytes streamed per second; the time is
// one step's updates (what a LoRA step adds to the base's). PAGODA_BENCH_THREADS sets the pool size.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/lora/lora_add.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace {

using pagoda::backend::LoraSegment;
using pagoda::backend::cpu::LoraOutPart;

constexpr int64_t kDim = 1024, kFfn = 2816, kRank = 16, kRows = 16, kLayers = 4;

struct Pair {  // one adapter's A and B^T of one projection, in the bench's number type
    std::vector<float> a32, bt32;
    std::vector<uint16_t> a16, bt16;
    int64_t in, out;
};

Pair make_pair(int64_t in, int64_t out, bool bf16, std::mt19937& rng) {
    std::normal_distribution<float> d(0.f, 0.1f);
    Pair p{{}, {}, {}, {}, in, out};
    p.a32.resize(size_t(kRank * in));
    p.bt32.resize(size_t(kRank * out));
    for (auto& v : p.a32) v = d(rng);
    for (auto& v : p.bt32) v = d(rng);
    if (bf16) {
        for (float v : p.a32) p.a16.push_back(pagoda::f32_to_bf16(v));
        for (float v : p.bt32) p.bt16.push_back(pagoda::f32_to_bf16(v));
    }
    return p;
}

LoraSegment segment(const Pair& p, bool bf16, std::span<const int32_t> rows) {
    LoraSegment s{p.a32.data(), nullptr, kRank, 2.0f, rows};
    s.elem = bf16 ? pagoda::gguf::GgmlType::BF16 : pagoda::gguf::GgmlType::F32;
    s.a_elems = bf16 ? static_cast<const void*>(p.a16.data()) : p.a32.data();
    s.bt_elems = bf16 ? static_cast<const void*>(p.bt16.data()) : p.bt32.data();
    return s;
}

void BM_LoraStep(benchmark::State& state) {
    const int n_adapters = int(state.range(0));
    const bool bf16 = state.range(1) == 1;
    const char* env = std::getenv("PAGODA_BENCH_THREADS");
    pagoda::ThreadPool pool(env ? std::atoi(env) : 2);
    pagoda::backend::cpu::LoraScratch scratch;
    std::mt19937 rng(7);
    // Per layer and adapter the seven projections: q, k, v, o (dim -> dim), gate, up (dim -> ffn), down.
    const int64_t ins[7] = {kDim, kDim, kDim, kDim, kDim, kDim, kFfn};
    const int64_t outs[7] = {kDim, kDim, kDim, kDim, kFfn, kFfn, kDim};
    std::vector<Pair> pairs;  // [layer][adapter][projection]
    double bytes = 0;
    for (int64_t l = 0; l < kLayers; ++l)
        for (int a = 0; a < n_adapters; ++a)
            for (int k = 0; k < 7; ++k) {
                pairs.push_back(make_pair(ins[k], outs[k], bf16, rng));
                bytes += double(kRank * (ins[k] + outs[k])) * (bf16 ? 2 : 4);
            }
    std::vector<std::vector<int32_t>> rows(static_cast<size_t>(n_adapters));
    for (int32_t t = 0; t < kRows; ++t) rows[size_t(t % n_adapters)].push_back(t);
    std::vector<float> x_dim(size_t(kRows * kDim), 0.5f), x_ffn(size_t(kRows * kFfn), 0.25f);
    std::vector<float> qkv(size_t(kRows * 3 * kDim)), o(size_t(kRows * kDim)), gu(size_t(kRows * 2 * kFfn)),
        down(size_t(kRows * kDim));
    // segs[layer][projection]: the step's segments of that weight.
    std::vector<std::vector<std::vector<LoraSegment>>> segs(kLayers, std::vector<std::vector<LoraSegment>>(7));
    for (int64_t l = 0; l < kLayers; ++l)
        for (int a = 0; a < n_adapters; ++a)
            for (int k = 0; k < 7; ++k)
                segs[size_t(l)][size_t(k)].push_back(segment(pairs[size_t((l * n_adapters + a) * 7 + k)], bf16, rows[size_t(a)]));
    for (auto _ : state) {
        for (int64_t l = 0; l < kLayers; ++l) {
            const auto& s = segs[size_t(l)];
            const LoraOutPart qkv_parts[3] = {{s[0], qkv.data(), 3 * kDim, kDim},
                                              {s[1], qkv.data() + kDim, 3 * kDim, kDim},
                                              {s[2], qkv.data() + 2 * kDim, 3 * kDim, kDim}};
            pagoda::backend::cpu::lora_add_parts(x_dim.data(), kDim, kDim, kRows, qkv_parts, pool, scratch);
            pagoda::backend::cpu::lora_add_rows(x_dim.data(), kDim, kDim, o.data(), kDim, kDim, kRows, s[3], pool, scratch);
            const LoraOutPart gu_parts[2] = {{s[4], gu.data(), 2 * kFfn, kFfn}, {s[5], gu.data() + kFfn, 2 * kFfn, kFfn}};
            pagoda::backend::cpu::lora_add_parts(x_dim.data(), kDim, kDim, kRows, gu_parts, pool, scratch);
            pagoda::backend::cpu::lora_add_rows(x_ffn.data(), kFfn, kFfn, down.data(), kDim, kDim, kRows, s[6], pool, scratch);
        }
        benchmark::ClobberMemory();
    }
    state.counters["GB/s"] = benchmark::Counter(bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LoraStep)->Args({1, 0})->Args({16, 0})->Args({1, 1})->Args({16, 1})->Unit(benchmark::kMicrosecond);

}  // namespace
