#include "tune/attention_timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"

namespace pagoda::tune {

AttentionBench::AttentionBench(const AttentionShape& shape, ThreadPool& threads) : shape_(shape) {
    shape_.layout.n_layers = 1;
    shape_.layout.validate();
    const kv::KvLayout& l = shape_.layout;
    if (shape_.sequences < 1 || shape_.tokens < 1 || shape_.tokens > shape_.position + 1 || shape_.n_heads < 1)
        fail("tune: attention shape '{}' is not one to time ({} sequences of {} tokens at position {}, {} heads)", shape_.what,
             shape_.sequences, shape_.tokens, shape_.position, shape_.n_heads);
    const int64_t keys = shape_.position + 1;
    const int32_t per_seq = int32_t((keys + l.block_size - 1) / l.block_size);
    pool_ = std::make_unique<backend::cpu::KvPool>(l, int64_t(per_seq) * shape_.sequences);

    // One chunk of random rows, written over every sequence's keys (the kernel's work does not
    // depend on the values, and the rows stay finite and varied).
    std::mt19937 rng(4321);
    std::normal_distribution<float> dist(0.f, 1.f);
    const int64_t kv_dim = int64_t(l.n_kv_heads) * l.head_dim, chunk = std::min<int64_t>(keys, 256);
    std::vector<float> k(size_t(chunk * kv_dim)), v(k.size());
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    std::vector<int64_t> slots;
    for (int32_t s = 0; s < shape_.sequences; ++s) {
        auto& table = tables_.emplace_back();
        for (int32_t b = 0; b < per_seq; ++b) table.push_back(s * per_seq + b);
        for (int64_t p0 = 0; p0 < keys; p0 += chunk) {
            const int64_t n = std::min(chunk, keys - p0);
            slots.resize(size_t(n));
            for (int64_t i = 0; i < n; ++i) {
                const int64_t p = p0 + i;
                slots[size_t(i)] = int64_t(table[size_t(p / l.block_size)]) * l.block_size + p % l.block_size;
            }
            pool_->write(0, slots.data(), n, k.data(), v.data(), &threads);
        }
    }
    for (const auto& t : tables_) seqs_.push_back({t.data(), int32_t(t.size())});
    for (int32_t s = 0; s < shape_.sequences; ++s)
        for (int64_t i = 0; i < shape_.tokens; ++i) {
            token_seq_.push_back(s);
            token_pos_.push_back(int32_t(shape_.position - shape_.tokens + 1 + i));
        }
    const int64_t n_tokens = int64_t(token_seq_.size()), q_dim = int64_t(shape_.n_heads) * l.head_dim;
    q_.resize(size_t(n_tokens * q_dim));
    for (auto& x : q_) x = dist(rng);
    out_.resize(q_.size());
    batch_.q = q_.data();
    batch_.n_tokens = n_tokens;
    batch_.n_heads = shape_.n_heads;
    batch_.token_seq = token_seq_.data();
    batch_.token_pos = token_pos_.data();
    batch_.seqs = seqs_.data();
    batch_.n_seqs = int32_t(seqs_.size());
    batch_.scale = 1.0f / std::sqrt(float(l.head_dim));
}

double AttentionBench::time(ThreadPool& threads, double min_seconds) {
    using Clock = std::chrono::steady_clock;
    backend::cpu::paged_attention(batch_, *pool_, 0, out_.data(), threads);
    double best = 1e300, total = 0;
    for (int r = 0; r < 200 && (r < 2 || total < min_seconds); ++r) {
        const auto start = Clock::now();
        backend::cpu::paged_attention(batch_, *pool_, 0, out_.data(), threads);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        best = std::min(best, s);
        total += s;
    }
    return best;
}

}  // namespace pagoda::tune
