// Shared by the paged attention tests (attention_test.cpp, amx_attention_test.cpp): a batch of
// sequences whose K/V sit both in contiguous arrays (the reference's view) and in a pool through
// shuffled block tables (the kernel's view), the naive double-precision reference, and runners.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention/attention.h"
#include "core/cpu_features.h"
#include "core/half.h"

namespace pagoda::backend::cpu::testing {

using kv::KvDtype;

inline std::vector<Isa> available_isas() {
    std::vector<Isa> out = {Isa::scalar};
    if (best_supported_isa() >= Isa::avx2) out.push_back(Isa::avx2);
    if (best_supported_isa() >= Isa::avx512) out.push_back(Isa::avx512);
    return out;
}

struct IsaGuard {
    Isa saved = active_isa();
    ~IsaGuard() { set_isa(saved); }
};

// The simd walk for the guard's lifetime, whatever PAGODA_ATTENTION says (these tests are its own).
struct SimdAttention {
    std::optional<AttentionMethod> saved = installed_attention_method();
    SimdAttention() { set_attention_method(AttentionMethod::simd); }
    ~SimdAttention() { set_attention_method(saved); }
};

inline float stored(KvDtype dtype, float x) {
    if (dtype == KvDtype::f16) return f16_to_f32(f32_to_f16(x));
    if (dtype == KvDtype::bf16) return bf16_to_f32(f32_to_bf16(x));
    return x;
}

// A batch: sequences with contiguous K/V (the reference's view) also written into a pool through
// shuffled block tables (the kernel's view), and the query tokens.
struct Scenario {
    kv::KvLayout layout;
    int32_t n_heads = 0;
    std::vector<std::vector<float>> k, v;     // per sequence [len][n_kv][d], values as stored
    std::vector<std::vector<int32_t>> tables; // per sequence
    std::vector<int32_t> token_seq, token_pos;
    std::vector<float> q;                     // [n_tokens][n_heads][d]
    std::unique_ptr<backend::cpu::KvPool> pool;

    int64_t n_tokens() const { return int64_t(token_seq.size()); }
    float scale() const { return 1.0f / std::sqrt(float(layout.head_dim)); }

    std::vector<AttentionSeq> seq_views() const {
        std::vector<AttentionSeq> out;
        for (const auto& t : tables) out.push_back({t.data(), int32_t(t.size())});
        return out;
    }
};

// lens: context length of each sequence; queries: (seq, pos) pairs. q_gain > 1 makes the softmax
// peaky so the online max jumps between tiles.
inline Scenario make_scenario(kv::KvLayout layout, int32_t group, const std::vector<int32_t>& lens,
                       const std::vector<std::pair<int32_t, int32_t>>& queries, uint32_t seed, float q_gain = 1.0f) {
    Scenario s;
    s.layout = layout;
    s.n_heads = layout.n_kv_heads * group;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int32_t bs = layout.block_size, d = layout.head_dim, nkv = layout.n_kv_heads;
    int32_t total_blocks = 0;
    for (int32_t len : lens) total_blocks += (len + bs - 1) / bs;
    total_blocks += 3;  // some blocks nobody uses
    std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    s.pool = std::make_unique<backend::cpu::KvPool>(layout, total_blocks);
    // Garbage in every slot first, so a kernel reading a wrong slot or past pos cannot pass.
    {
        std::vector<float> junk(size_t(nkv) * d, 1e3f);
        for (int64_t slot = 0; slot < s.pool->n_slots(); ++slot)
            for (int32_t l = 0; l < layout.n_layers; ++l) s.pool->write(l, &slot, 1, junk.data(), junk.data());
    }
    size_t next = 0;
    for (int32_t len : lens) {
        std::vector<int32_t> table;
        for (int32_t b = 0; b < (len + bs - 1) / bs; ++b) table.push_back(ids[next++]);
        std::vector<float> k(size_t(len) * nkv * d), v(k.size());
        for (auto& x : k) x = dist(rng);
        for (auto& x : v) x = dist(rng);
        for (int32_t p = 0; p < len; ++p) {
            int64_t slot = int64_t(table[size_t(p / bs)]) * bs + p % bs;
            s.pool->write(layout.n_layers - 1, &slot, 1, &k[size_t(p) * nkv * d], &v[size_t(p) * nkv * d]);
        }
        if (layout.dtype == KvDtype::q8) {
            // A q8 row's stored values depend on the whole row (its scale): take them from the
            // pool's read-back (codes x scale, tested on its own in kv_pool_test).
            for (int32_t p = 0; p < len; ++p) {
                const int64_t slot = int64_t(table[size_t(p / bs)]) * bs + p % bs;
                for (int32_t h = 0; h < nkv; ++h) {
                    s.pool->read_k(layout.n_layers - 1, slot, h, &k[(size_t(p) * nkv + h) * d]);
                    s.pool->read_v(layout.n_layers - 1, slot, h, &v[(size_t(p) * nkv + h) * d]);
                }
            }
        } else {
            for (auto& x : k) x = stored(layout.dtype, x);
            for (auto& x : v) x = stored(layout.dtype, x);
        }
        s.k.push_back(std::move(k));
        s.v.push_back(std::move(v));
        s.tables.push_back(std::move(table));
    }
    for (auto [seq, pos] : queries) {
        s.token_seq.push_back(seq);
        s.token_pos.push_back(pos);
    }
    s.q.resize(size_t(s.n_tokens()) * s.n_heads * d);
    for (auto& x : s.q) x = dist(rng) * q_gain;
    return s;
}

// Naive reference, straight from the definition: token t at p sees keys max(0, p - window + 1) .. p
// (window 0: all), each score s capped to softcap * tanh(s / softcap) when softcap > 0.
inline std::vector<double> reference(const Scenario& s, int32_t window = 0, double softcap = 0) {
    const int32_t d = s.layout.head_dim, nkv = s.layout.n_kv_heads, group = s.n_heads / nkv;
    std::vector<double> out(size_t(s.n_tokens()) * s.n_heads * d);
    for (int64_t t = 0; t < s.n_tokens(); ++t) {
        const auto& k = s.k[size_t(s.token_seq[t])];
        const auto& v = s.v[size_t(s.token_seq[t])];
        const int32_t n = s.token_pos[t] + 1;
        const int32_t lo = window > 0 ? std::max(0, n - window) : 0;
        for (int32_t h = 0; h < s.n_heads; ++h) {
            const int32_t kvh = h / group;
            const float* q = &s.q[(size_t(t) * s.n_heads + h) * d];
            std::vector<double> score(static_cast<size_t>(n - lo));
            for (int32_t j = lo; j < n; ++j) {
                double dot = 0;
                for (int32_t i = 0; i < d; ++i) dot += double(q[i]) * k[(size_t(j) * nkv + kvh) * d + i];
                double x = dot / std::sqrt(double(d));
                if (softcap > 0) x = softcap * std::tanh(x / softcap);
                score[size_t(j - lo)] = x;
            }
            double mx = *std::max_element(score.begin(), score.end()), sum = 0;
            for (auto& x : score) sum += (x = std::exp(x - mx));
            for (int32_t i = 0; i < d; ++i) {
                double acc = 0;
                for (int32_t j = lo; j < n; ++j) acc += score[size_t(j - lo)] * v[(size_t(j) * nkv + kvh) * d + i];
                out[(size_t(t) * s.n_heads + h) * d + i] = acc / sum;
            }
        }
    }
    return out;
}

inline std::vector<float> run_kernel(const Scenario& s, ThreadPool& threads, int32_t window = 0, float softcap = 0) {
    std::vector<AttentionSeq> views = s.seq_views();
    PagedAttentionBatch b;
    b.q = s.q.data();
    b.n_tokens = s.n_tokens();
    b.n_heads = s.n_heads;
    b.token_seq = s.token_seq.data();
    b.token_pos = s.token_pos.data();
    b.seqs = views.data();
    b.n_seqs = int32_t(views.size());
    b.scale = s.scale();
    b.sliding_window = window;
    b.softcap = softcap;
    std::vector<float> out(s.q.size(), std::nanf(""));
    paged_attention(b, *s.pool, s.layout.n_layers - 1, out.data(), threads);
    return out;
}

inline double max_abs_diff(const std::vector<float>& got, const std::vector<double>& want) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        double e = std::fabs(double(got[i]) - want[i]);
        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
    }
    return worst;
}

// Prefill-shaped batches: for sequence s, the queries are runs of increasing positions; the kernel
// groups consecutive tokens of one sequence into tasks, which must not change any result.
inline std::vector<std::pair<int32_t, int32_t>> prefill_queries(const std::vector<int32_t>& lens, int config) {
    std::vector<std::pair<int32_t, int32_t>> q;
    // Sequence 0: a whole prompt from position 0, 40 tokens (several tasks, crosses a tile).
    for (int32_t p = 0; p < 40; ++p) q.push_back({0, p});
    // Sequence 1: chunked prefill after a cached prefix, starting mid-tile, odd length.
    const int32_t chunk = 1 + (config * 7) % 37;
    for (int32_t p = lens[1] - chunk; p < lens[1]; ++p) q.push_back({1, p});
    // Sequence 2: increasing but not contiguous positions, then a restart (a new run), then a
    // decode-style single token of sequence 0 between runs.
    for (int32_t p : {3, 9, 63, 64, 65, 127, 128, 200}) q.push_back({2, std::min(p, lens[2] - 1)});
    q.push_back({0, lens[0] - 1});
    for (int32_t p = lens[2] - 20; p < lens[2]; p += 3) q.push_back({2, p});
    q.push_back({2, 0});
    return q;
}

// The kernel on a subset of `full`'s tokens (same pool, same queries), in the given order.
inline std::vector<float> run_subset(Scenario& full, const std::vector<int64_t>& tokens, ThreadPool& threads) {
    const size_t row = size_t(full.n_heads) * full.layout.head_dim;
    Scenario part;
    part.layout = full.layout;
    part.n_heads = full.n_heads;
    part.tables = full.tables;
    for (int64_t t : tokens) {
        part.token_seq.push_back(full.token_seq[size_t(t)]);
        part.token_pos.push_back(full.token_pos[size_t(t)]);
        part.q.insert(part.q.end(), full.q.begin() + t * int64_t(row), full.q.begin() + (t + 1) * int64_t(row));
    }
    part.pool = std::move(full.pool);
    std::vector<float> out = run_kernel(part, threads);
    full.pool = std::move(part.pool);
    return out;
}

// A one-layer KV layout.
inline kv::KvLayout one_layer(int32_t n_kv_heads, int32_t head_dim, int32_t block_size, KvDtype dtype) {
    kv::KvLayout L;
    L.n_layers = 1;
    L.n_kv_heads = n_kv_heads;
    L.head_dim = head_dim;
    L.block_size = block_size;
    L.dtype = dtype;
    return L;
}

// A long two-sequence prefill batch: sequence 0 a chunk after a cached prefix (positions 210..299),
// sequence 1 a whole prompt of 150, blocks of the layout's size.
inline Scenario two_sequence_prefill(const kv::KvLayout& L, int32_t group) {
    std::vector<std::pair<int32_t, int32_t>> batch;
    for (int32_t p = 210; p < 300; ++p) batch.push_back({0, p});  // chunked prefill, cached prefix
    for (int32_t p = 0; p < 150; ++p) batch.push_back({1, p});    // whole prompt
    return make_scenario(L, group, {300, 150}, batch, 21, 4.0f);
}

// Every token of `full` gets the bits it gets inside the whole batch on 2 threads also on 1 thread,
// in chunks of 7 tokens, with the sequences in the other order (the second's 90 tokens first: the
// shape two_sequence_prefill makes) and decoded alone (every third token). `what` names the case in
// failures. Runs whatever attention method and ISA path are installed.
inline void expect_batch_invariant_bits(Scenario& full, const std::string& what) {
    const int64_t n = full.n_tokens();
    const size_t row = size_t(full.n_heads) * full.layout.head_dim;
    ThreadPool two(2), one(1);
    const std::vector<float> together = run_kernel(full, two);
    auto same = [&](const float* got, int64_t t, const char* how) {
        EXPECT_EQ(std::memcmp(got, together.data() + t * int64_t(row), row * sizeof(float)), 0)
            << how << ": token " << t << " " << what;
    };
    std::vector<float> single_thread = run_kernel(full, one);
    for (int64_t t = 0; t < n; ++t) same(single_thread.data() + t * int64_t(row), t, "1 thread");
    for (int64_t t = 0; t < n; t += 7) {
        std::vector<int64_t> chunk;
        for (int64_t u = t; u < std::min(n, t + 7); ++u) chunk.push_back(u);
        std::vector<float> got = run_subset(full, chunk, two);
        for (size_t i = 0; i < chunk.size(); ++i) same(got.data() + i * row, chunk[i], "chunk of 7");
    }
    std::vector<int64_t> swapped;
    for (int64_t t = 90; t < n; ++t) swapped.push_back(t);
    for (int64_t t = 0; t < 90; ++t) swapped.push_back(t);
    std::vector<float> got = run_subset(full, swapped, two);
    for (size_t i = 0; i < swapped.size(); ++i) same(got.data() + i * row, swapped[i], "reordered");
    for (int64_t t = 0; t < n; t += 3) {  // every third token decoded alone (each position class)
        std::vector<float> alone = run_subset(full, {t}, one);
        same(alone.data(), t, "alone");
    }
}

}  // namespace pagoda::backend::cpu::testing
