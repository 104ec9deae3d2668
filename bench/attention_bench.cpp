// Paged flash attention vs a naive attention, per decoded token, at growing context; paged
// attention over a whole prefill (every token of a 512-token prompt attends to its prefix); plus a
// KV memory utilisation simulation (paged blocks vs contiguous max-length reservation).
//
//   build/bench/attention_bench [--benchmark_filter=...]
//
// Decode shapes follow a Llama-3-8B layer: 32 query heads, 8 KV heads, head_dim 128, F16 KV, block
// 16. Prefill: 512 or 2048 tokens, block 16, 2 threads (PAGODA_BENCH_THREADS sets another count),
// f16 or q8 KV, with 12 heads / 12 KV heads of 64 (the small test model), 32 / 4 of 64 (GQA) and
// 32 / 8 of 128 (Llama 3 8B) and 32 / 32 of 96 (Phi-3 mini); FLOPs counted as 4 * head_dim per (query head, visible key): the
// QK^T and PV products.
#include <algorithm>
#include <benchmark/benchmark.h>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/kv/kv_pool.h"

namespace {

using namespace pagoda;

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128;

// A one-layer KV layout (the benchmarks below time one layer's attention or stores).
kv::KvLayout one_layer(int32_t kv_heads, int32_t head_dim, int32_t block_size, kv::KvDtype dtype) {
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = kv_heads;
    L.head_dim = head_dim;
    L.block_size = block_size;
    L.dtype = dtype;
    return L;
}

struct DecodeSetup {
    std::unique_ptr<backend::cpu::KvPool> pool;
    std::vector<int32_t> table;
    std::vector<float> q, out, k_contig, v_contig;  // contiguous F32 copies for the naive version

    DecodeSetup(int ctx, kv::KvDtype dtype, int block_size = 16) {
        const kv::KvLayout L = one_layer(kKvHeads, kHeadDim, block_size, dtype);
        int n_blocks = (ctx + block_size - 1) / block_size;
        pool = std::make_unique<backend::cpu::KvPool>(L, n_blocks);
        table.resize(size_t(n_blocks));
        std::iota(table.begin(), table.end(), 0);
        std::mt19937 rng(1);
        std::shuffle(table.begin(), table.end(), rng);
        std::uniform_real_distribution<float> dist(-1.f, 1.f);
        const size_t width = size_t(kKvHeads) * kHeadDim;
        k_contig.resize(size_t(ctx) * width);
        v_contig.resize(k_contig.size());
        for (auto& x : k_contig) x = dist(rng);
        for (auto& x : v_contig) x = dist(rng);
        for (int p = 0; p < ctx; ++p) {
            int64_t slot = int64_t(table[size_t(p / block_size)]) * block_size + p % block_size;
            pool->write(0, &slot, 1, &k_contig[p * width], &v_contig[p * width]);
        }
        q.resize(size_t(kHeads) * kHeadDim);
        for (auto& x : q) x = dist(rng);
        out.resize(q.size());
    }
};

// One decode token of sequence 0 (its position and index live in the caller's variables).
backend::cpu::PagedAttentionBatch decode_batch(const float* q, int n_heads, int head_dim, const backend::cpu::AttentionSeq* seq,
                                          const int32_t* token_seq, const int32_t* token_pos) {
    backend::cpu::PagedAttentionBatch b;
    b.q = q;
    b.n_tokens = 1;
    b.n_heads = n_heads;
    b.token_seq = token_seq;
    b.token_pos = token_pos;
    b.seqs = seq;
    b.n_seqs = 1;
    b.scale = 1.0f / std::sqrt(float(head_dim));
    return b;
}

// The ISA path and the attention method a call with this cache type takes (PAGODA_ISA,
// PAGODA_ATTENTION choose them).
std::string path_label(kv::KvDtype dtype) {
    const bool amx = backend::cpu::amx_attention_applies(dtype, 0, 0.0f);
    return std::string(isa_name(active_isa())) + " " +
           backend::cpu::attention_method_name(amx ? backend::cpu::AttentionMethod::amx_bf16 : backend::cpu::AttentionMethod::simd);
}

void run_paged(benchmark::State& state, kv::KvDtype dtype) {
    const int ctx = int(state.range(0));
    DecodeSetup s(ctx, dtype);
    ThreadPool threads(1);
    backend::cpu::AttentionSeq seq{s.table.data(), int32_t(s.table.size())};
    int32_t token_seq = 0, token_pos = ctx - 1;
    const backend::cpu::PagedAttentionBatch b = decode_batch(s.q.data(), kHeads, kHeadDim, &seq, &token_seq, &token_pos);
    for (auto _ : state) {
        backend::cpu::paged_attention(b, *s.pool, 0, s.out.data(), threads);
        benchmark::DoNotOptimize(s.out.data());
    }
    state.SetLabel(path_label(dtype));
    // K and V bytes read per token: the roofline for decode attention.
    state.SetBytesProcessed(int64_t(state.iterations()) * 2 * ctx * kKvHeads * int64_t(kv::kv_row_bytes(dtype, kHeadDim)));
}

// The textbook version: full score row per head, softmax, weighted sum; contiguous F32 K/V, and
// K/V re-read for each query head of a GQA group.
void BM_NaiveAttentionDecode(benchmark::State& state) {
    const int ctx = int(state.range(0));
    DecodeSetup s(ctx, kv::KvDtype::f32);
    const int group = kHeads / kKvHeads;
    const float scale = 1.0f / std::sqrt(float(kHeadDim));
    std::vector<float> score(static_cast<size_t>(ctx));
    for (auto _ : state) {
        for (int h = 0; h < kHeads; ++h) {
            const float* q = &s.q[size_t(h) * kHeadDim];
            const int kvh = h / group;
            for (int j = 0; j < ctx; ++j) {
                const float* k = &s.k_contig[(size_t(j) * kKvHeads + kvh) * kHeadDim];
                float dot = 0;
                for (int i = 0; i < kHeadDim; ++i) dot += q[i] * k[i];
                score[size_t(j)] = dot * scale;
            }
            float mx = *std::max_element(score.begin(), score.end()), sum = 0;
            for (auto& x : score) sum += (x = std::exp(x - mx));
            float* o = &s.out[size_t(h) * kHeadDim];
            std::fill(o, o + kHeadDim, 0.0f);
            for (int j = 0; j < ctx; ++j) {
                const float* v = &s.v_contig[(size_t(j) * kKvHeads + kvh) * kHeadDim];
                for (int i = 0; i < kHeadDim; ++i) o[i] += score[size_t(j)] * v[i];
            }
            for (int i = 0; i < kHeadDim; ++i) o[i] /= sum;
        }
        benchmark::DoNotOptimize(s.out.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * 2 * ctx * kKvHeads * kHeadDim * 4);
}

void BM_PagedAttentionDecodeF16(benchmark::State& state) { run_paged(state, kv::KvDtype::f16); }
void BM_PagedAttentionDecodeF32(benchmark::State& state) { run_paged(state, kv::KvDtype::f32); }
void BM_PagedAttentionDecodeQ8(benchmark::State& state) { run_paged(state, kv::KvDtype::q8); }

// One decode token's KV store (KvPool::write: a K and a V row per KV head) at the `small` preset's
// shape (12 KV heads of 64) into a cache-resident pool, f16, bf16 and q8, through the scalar
// definitions (core/half.h, kv/kv_q8.h: element by element) and through kv_rows.h's active path
// (the host's best, or PAGODA_ISA's), side by side in one run: the encoding's own cost, without the
// cold lines a decode step also pays for (KvPool::prefetch_write's job).
//   build/bench/pagoda_bench --benchmark_filter=BM_KvStoreDecode
void BM_KvStoreDecode(benchmark::State& state) {
    const auto dtype = state.range(0) == 0 ? kv::KvDtype::f16 : state.range(0) == 1 ? kv::KvDtype::bf16 : kv::KvDtype::q8;
    const Isa isa = state.range(1) == 0 ? Isa::scalar : active_isa();  // PAGODA_ISA picks the other path
    const kv::KvLayout L = one_layer(12, 64, 16, dtype);
    backend::cpu::KvPool pool(L, 4);
    std::vector<float> k(size_t(L.n_kv_heads * L.head_dim)), v(k.size());
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = 0; i < k.size(); ++i) k[i] = normal(rng), v[i] = normal(rng);
    const Isa saved = active_isa();
    set_isa(isa);
    int64_t slot = 0;
    for (auto _ : state) {
        pool.write(0, &slot, 1, k.data(), v.data());
        slot = (slot + 1) % pool.n_slots();
        benchmark::ClobberMemory();
    }
    set_isa(saved);
    state.SetLabel(std::string(kv::kv_dtype_name(dtype)) + " " + isa_name(isa));
}
BENCHMARK(BM_KvStoreDecode)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kNanosecond);

BENCHMARK(BM_NaiveAttentionDecode)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PagedAttentionDecodeF32)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PagedAttentionDecodeF16)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PagedAttentionDecodeQ8)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMicrosecond);

// Times paged_attention(b) on layer 0 of the pool, one call an iteration (manual time); cold: 64 MiB
// read on the pool's threads before each call, as a step's matmuls (the workers are then spinning,
// not asleep, when the attention call starts), so the K/V rows come from memory.
void time_decode_calls(benchmark::State& state, const backend::cpu::PagedAttentionBatch& b, const backend::cpu::KvPool& pool,
                       int n_threads, bool cold, float* out) {
    ThreadPool threads(n_threads);
    std::vector<uint64_t> sweep(cold ? (size_t(64) << 20) / 8 : 0, 1);
    std::vector<uint64_t> sinks(static_cast<size_t>(n_threads), 0);
    for (auto _ : state) {
        const size_t per = sweep.size() / size_t(n_threads);
        threads.run(n_threads, [&](int task, int) {
            uint64_t sum = 0;
            for (size_t i = per * size_t(task); i < per * size_t(task + 1); i += 8) sum += sweep[i];
            sinks[size_t(task)] += sum;
        });
        const auto t0 = std::chrono::steady_clock::now();
        backend::cpu::paged_attention(b, pool, 0, out, threads);
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        benchmark::DoNotOptimize(out);
    }
    benchmark::DoNotOptimize(sinks.data());
    state.SetLabel(path_label(pool.layout().dtype));
}

// One decode token at the `small` preset's attention shape (12 heads, 12 KV heads of 64; f16, or q8
// with `q8` = 1: about half the bytes; blocks of `block` tokens in shuffled order, 16 the default)
// as a decode step meets it: with `cold` = 1, 64 MiB are read between calls (a step streams its
// weights, more than any L3 seen, between a layer's attention calls), so the K/V rows come from
// memory; cold = 0 leaves them in cache. Only the attention call is timed. Arguments: context,
// threads, cold, block, q8. Counter GB/s: K and V bytes read per second.
//   build/bench/pagoda_bench --benchmark_filter=BM_AttentionDecodeSmall
void time_one_decode_token(benchmark::State& state, int n_heads, int n_kv_heads) {
    const int ctx = int(state.range(0)), n_threads = int(state.range(1));
    const bool cold = state.range(2) != 0;
    const int block = int(state.range(3));
    const kv::KvDtype dtype = state.range(4) != 0 ? kv::KvDtype::q8 : kv::KvDtype::f16;
    constexpr int kDim = 64;
    const kv::KvLayout L = one_layer(n_kv_heads, kDim, block, dtype);
    const int n_blocks = (ctx + block - 1) / block;
    backend::cpu::KvPool pool(L, 4 * n_blocks);  // a pool larger than the sequence: its blocks scattered
    std::vector<int32_t> all(size_t(4 * n_blocks));
    std::iota(all.begin(), all.end(), 0);
    std::mt19937 rng(5);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int32_t> table(all.begin(), all.begin() + n_blocks);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> k(size_t(n_kv_heads) * kDim), v(k.size());
    for (int p = 0; p < ctx; ++p) {
        for (auto& x : k) x = dist(rng);
        for (auto& x : v) x = dist(rng);
        const int64_t slot = int64_t(table[size_t(p / block)]) * block + p % block;
        pool.write(0, &slot, 1, k.data(), v.data());
    }
    std::vector<float> q(size_t(n_heads) * kDim), out(q.size());
    for (auto& x : q) x = dist(rng);
    backend::cpu::AttentionSeq seq{table.data(), int32_t(table.size())};
    int32_t token_seq = 0, token_pos = ctx - 1;
    const backend::cpu::PagedAttentionBatch b = decode_batch(q.data(), n_heads, kDim, &seq, &token_seq, &token_pos);
    time_decode_calls(state, b, pool, n_threads, cold, out.data());
    const double kv_bytes = 2.0 * ctx * n_kv_heads * double(L.row_bytes());  // K and V
    state.counters["GB/s"] = benchmark::Counter(kv_bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
void BM_AttentionDecodeSmall(benchmark::State& state) { time_one_decode_token(state, 12, 12); }
// The same at tinyllama's attention shape: 32 query heads on 4 KV heads of 64 (8 query heads share
// each K/V row, so the walk does 8x the arithmetic per byte of the small shape).
//   build/bench/pagoda_bench --benchmark_filter=BM_AttentionDecodeGqa
void BM_AttentionDecodeGqa(benchmark::State& state) { time_one_decode_token(state, 32, 4); }
// The cold calls are short beside the 64 MiB sweep around each: the minimum time counts only the
// timed calls, so it is kept low, or one cold row would take minutes of sweeping.
BENCHMARK(BM_AttentionDecodeSmall)
    ->ArgsProduct({{16, 64, 128, 1024}, {1, 2}, {1, 0}, {16}, {0}})
    ->ArgsProduct({{1024}, {1, 2}, {1, 0}, {32, 64}, {0}})
    ->ArgsProduct({{128, 1024}, {1, 2}, {1, 0}, {16}, {1}})
    ->UseManualTime()
    ->MinTime(0.05)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeGqa)
    ->ArgsProduct({{1024, 4096}, {1, 2}, {1, 0}, {16}, {0, 1}})
    ->UseManualTime()
    ->MinTime(0.05)
    ->Unit(benchmark::kMicrosecond);

// A decode step of `seqs` sequences at the `small` attention shape (f16, blocks of 16) whose first
// `shared` positions are one prompt prefix, each with `own` positions of its own after it. With
// sharing = 1 their tables name the same blocks for the prefix (what the prefix cache gives them:
// the tokens walk those keys together, attention_internal.h: DecodeShare); with 0 each has a copy
// in blocks of its own (the same values, so the same results: the walk of each token alone). cold
// as BM_AttentionDecodeSmall (64 MiB read between calls). Arguments: seqs, shared, own, sharing,
// threads, cold. Counter tok_GB/s: the K and V bytes the tokens attend to (each sequence's whole
// context) per second.
//   build/bench/pagoda_bench --benchmark_filter=BM_AttentionDecodeShared
void BM_AttentionDecodeShared(benchmark::State& state) {
    const int n_seqs = int(state.range(0)), shared = int(state.range(1)), own = int(state.range(2));
    const bool sharing = state.range(3) != 0, cold = state.range(5) != 0;
    const int n_threads = int(state.range(4));
    constexpr int kSmallHeads = 12, kDim = 64, kBlock = 16;
    const kv::KvLayout L = one_layer(kSmallHeads, kDim, kBlock, kv::KvDtype::f16);
    const int shared_blocks = shared / kBlock, own_blocks = (own + kBlock - 1) / kBlock;
    const int n_blocks = (shared_blocks + own_blocks) * n_seqs;
    backend::cpu::KvPool pool(L, 2 * n_blocks);
    std::vector<int32_t> all(size_t(2 * n_blocks));
    std::iota(all.begin(), all.end(), 0);
    std::mt19937 rng(7);
    std::shuffle(all.begin(), all.end(), rng);
    size_t next = 0;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> k(size_t(kSmallHeads) * kDim), v(k.size());
    std::vector<float> prefix_k(size_t(shared) * k.size()), prefix_v(prefix_k.size());
    for (auto& x : prefix_k) x = dist(rng);
    for (auto& x : prefix_v) x = dist(rng);
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
    for (int s = 0; s < n_seqs; ++s) {
        auto& t = tables[size_t(s)];
        for (int i = 0; i < shared_blocks + own_blocks; ++i)
            t.push_back(sharing && s > 0 && i < shared_blocks ? tables[0][size_t(i)] : all[next++]);
        for (int p = 0; p < shared + own; ++p) {
            if (sharing && s > 0 && p < shared) continue;  // already in sequence 0's blocks
            const bool in_prefix = p < shared;
            for (size_t i = 0; i < k.size(); ++i) {
                k[i] = in_prefix ? prefix_k[size_t(p) * k.size() + i] : dist(rng);
                v[i] = in_prefix ? prefix_v[size_t(p) * k.size() + i] : dist(rng);
            }
            const int64_t slot = int64_t(t[size_t(p / kBlock)]) * kBlock + p % kBlock;
            pool.write(0, &slot, 1, k.data(), v.data());
        }
    }
    std::vector<backend::cpu::AttentionSeq> seqs;
    for (const auto& t : tables) seqs.push_back({t.data(), int32_t(t.size())});
    std::vector<int32_t> token_seq(static_cast<size_t>(n_seqs)), token_pos(static_cast<size_t>(n_seqs), shared + own - 1);
    std::iota(token_seq.begin(), token_seq.end(), 0);
    std::vector<float> q(size_t(n_seqs) * kSmallHeads * kDim), out(q.size());
    for (auto& x : q) x = dist(rng);
    backend::cpu::PagedAttentionBatch b = decode_batch(q.data(), kSmallHeads, kDim, seqs.data(), token_seq.data(), token_pos.data());
    b.n_tokens = n_seqs;
    b.n_seqs = n_seqs;
    time_decode_calls(state, b, pool, n_threads, cold, out.data());
    const double kv_bytes = 2.0 * n_seqs * (shared + own) * kSmallHeads * double(L.row_bytes());
    state.counters["tok_GB/s"] = benchmark::Counter(kv_bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionDecodeShared)
    ->ArgsProduct({{8}, {192, 1024}, {64}, {0, 1}, {1, 2}, {1, 0}})
    ->ArgsProduct({{16}, {1024}, {64}, {0, 1}, {2}, {1}})
    ->UseManualTime()
    ->MinTime(0.05)
    ->Unit(benchmark::kMicrosecond);

// One sequence's whole prompt in one batch: token t at position t attends to keys 0..t.
void paged_attention_prefill(benchmark::State& state, kv::KvDtype dtype) {
    const int n_tokens = int(state.range(0)), n_heads = int(state.range(1)), n_kv = int(state.range(2));
    const int head_dim = int(state.range(3)), block_size = 16;
    const kv::KvLayout L = one_layer(n_kv, head_dim, block_size, dtype);
    const int n_blocks = (n_tokens + block_size - 1) / block_size;
    backend::cpu::KvPool pool(L, n_blocks);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::mt19937 rng(2);
    std::shuffle(table.begin(), table.end(), rng);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> k(size_t(n_kv) * head_dim), v(k.size());
    for (int p = 0; p < n_tokens; ++p) {
        for (auto& x : k) x = dist(rng);
        for (auto& x : v) x = dist(rng);
        int64_t slot = int64_t(table[size_t(p / block_size)]) * block_size + p % block_size;
        pool.write(0, &slot, 1, k.data(), v.data());
    }
    std::vector<float> q(size_t(n_tokens) * n_heads * head_dim), out(q.size());
    for (auto& x : q) x = dist(rng);
    std::vector<int32_t> token_seq(size_t(n_tokens), 0), token_pos(static_cast<size_t>(n_tokens));
    std::iota(token_pos.begin(), token_pos.end(), 0);
    backend::cpu::AttentionSeq seq{table.data(), int32_t(table.size())};
    backend::cpu::PagedAttentionBatch b;
    b.q = q.data();
    b.n_tokens = n_tokens;
    b.n_heads = n_heads;
    b.token_seq = token_seq.data();
    b.token_pos = token_pos.data();
    b.seqs = &seq;
    b.n_seqs = 1;
    b.scale = 1.0f / std::sqrt(float(head_dim));
    // PAGODA_BENCH_THREADS=1: one thread's figure (bench/paired_bench.py); 2 by default.
    const char* env = std::getenv("PAGODA_BENCH_THREADS");
    ThreadPool threads(env && std::atoi(env) > 0 ? std::atoi(env) : 2);
    for (auto _ : state) {
        backend::cpu::paged_attention(b, pool, 0, out.data(), threads);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetLabel(path_label(dtype));
    const double keys = double(n_tokens) * (n_tokens + 1) / 2;  // visible keys summed over the queries
    state.counters["GFLOP/s"] = benchmark::Counter(4.0 * head_dim * keys * n_heads * double(state.iterations()) / 1e9,
                                                   benchmark::Counter::kIsRate);
}
void BM_PagedAttentionPrefillF16(benchmark::State& state) { paged_attention_prefill(state, kv::KvDtype::f16); }
void BM_PagedAttentionPrefillQ8(benchmark::State& state) { paged_attention_prefill(state, kv::KvDtype::q8); }
// Arguments: tokens, query heads, KV heads, head_dim: `small`, a GQA shape, and Llama 3 8B's.
BENCHMARK(BM_PagedAttentionPrefillF16)
    ->Args({512, 12, 12, 64})
    ->Args({2048, 12, 12, 64})
    ->Args({512, 32, 4, 64})
    ->Args({2048, 32, 4, 64})
    ->Args({512, 32, 8, 128})
    ->Args({512, 32, 32, 96})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PagedAttentionPrefillQ8)
    ->Args({512, 12, 12, 64})
    ->Args({2048, 12, 12, 64})
    ->Args({512, 32, 8, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// KV utilisation: requests with prompt and output lengths uniform in [16, 1024] and a 2048-token
// context limit, each observed at a uniformly random point of its generation. Paged: a request
// holds ceil(tokens / 16) blocks of 16. Contiguous: it reserves its max length (2048) up front.
// Reported counters: fraction of allocated KV slots that hold a token.
void BM_KvUtilisationSimulation(benchmark::State& state) {
    const int block = int(state.range(0));
    const int max_len = 2048;
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> len(16, 1024);
    double held = 0, paged = 0, contiguous = 0, held_done = 0, paged_done = 0;
    for (auto _ : state) {
        for (int r = 0; r < 100000; ++r) {
            int prompt = len(rng), output = len(rng);
            int now = prompt + std::uniform_int_distribution<int>(1, output)(rng);
            held += now;
            paged += double((now + block - 1) / block * block);
            contiguous += max_len;
            held_done += prompt + output;
            paged_done += double((prompt + output + block - 1) / block * block);
        }
    }
    state.counters["paged_util"] = held / paged;
    state.counters["contiguous_util"] = held / contiguous;
    state.counters["paged_util_at_finish"] = held_done / paged_done;
}
BENCHMARK(BM_KvUtilisationSimulation)->Arg(16)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
