// ALiBi paged attention on the CPU (declared in alibi_attention.h).
#include "backend/cpu/attention/alibi_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/alibi.h"
#include "core/error.h"

namespace pagoda::backend::cpu {

void alibi_attention(const PagedAttentionBatch& b, const int32_t* query_pos, float max_bias, const KvPool& pool,
                     int32_t layer, float* out, ThreadPool& threads) {
    validate_paged_attention(b, pool, layer, out);
    if (!(max_bias > 0) || !std::isfinite(max_bias)) fail("alibi attention: max bias {} is not > 0", max_bias);
    if (b.n_tokens == 0) return;
    if (!query_pos) fail("alibi attention: missing query positions");
    const kv::KvLayout& L = pool.layout();
    const int32_t d = L.head_dim, kv_heads = L.n_kv_heads, group = b.n_heads / kv_heads;
    const int64_t width = int64_t(b.n_heads) * d;
    // The first key token t reads (attention.h: first_key, else its window back from token_pos).
    auto first_of = [&](int64_t t) -> int32_t {
        if (b.sliding_window <= 0) return 0;
        return b.first_key ? b.first_key[t] : std::max(0, b.token_pos[t] - b.sliding_window + 1);
    };

    // Each sequence's tokens (in batch order) and the furthest key any of them reads.
    std::vector<std::vector<int64_t>> tokens(size_t(b.n_seqs));
    std::vector<int32_t> last(size_t(b.n_seqs), -1);
    for (int64_t t = 0; t < b.n_tokens; ++t) {
        const auto s = size_t(b.token_seq[t]);
        tokens[s].push_back(t);
        last[s] = std::max(last[s], b.token_pos[t]);
    }
    std::vector<int32_t> seqs;
    for (int32_t s = 0; s < b.n_seqs; ++s)
        if (!tokens[size_t(s)].empty()) seqs.push_back(s);
    std::vector<float> slopes(size_t(b.n_heads));
    for (int32_t h = 0; h < b.n_heads; ++h) slopes[size_t(h)] = float(alibi_slope(h, b.n_heads, max_bias));

    const int64_t n_tasks = int64_t(seqs.size()) * kv_heads;
    threads.parallel_for(n_tasks, 1, [&](int64_t begin, int64_t end, int) {
        std::vector<float> keys, values, scores;
        for (int64_t task = begin; task < end; ++task) {
            const int32_t s = seqs[size_t(task / kv_heads)], kvh = int32_t(task % kv_heads);
            const int32_t n_keys = last[size_t(s)] + 1;
            keys.assign(size_t(n_keys) * size_t(d), 0.0f);
            values.assign(size_t(n_keys) * size_t(d), 0.0f);
            const int32_t* table = b.seqs[s].block_table;
            // Keys below every window of this sequence may sit in freed blocks: read from the nearest.
            int32_t lowest = 0;
            if (b.sliding_window > 0) {
                lowest = std::numeric_limits<int32_t>::max();
                for (int64_t t : tokens[size_t(s)]) lowest = std::min(lowest, first_of(t));
            }
            for (int32_t j = lowest; j < n_keys; ++j) {
                const int64_t slot = int64_t(table[j / L.block_size]) * L.block_size + j % L.block_size;
                pool.read_k(layer, slot, kvh, keys.data() + size_t(j) * size_t(d));
                pool.read_v(layer, slot, kvh, values.data() + size_t(j) * size_t(d));
            }
            for (int64_t t : tokens[size_t(s)]) {
                const int32_t pos = b.token_pos[t], qpos = query_pos[t];
                const int32_t first = first_of(t);
                for (int32_t h = kvh * group; h < (kvh + 1) * group; ++h) {
                    const float* q = b.q + t * width + int64_t(h) * d;
                    scores.assign(size_t(pos - first + 1), 0.0f);
                    float max = -std::numeric_limits<float>::infinity();
                    for (int32_t j = first; j <= pos; ++j) {
                        const float* k = keys.data() + size_t(j) * size_t(d);
                        float dot = 0;
                        for (int32_t i = 0; i < d; ++i) dot += q[i] * k[i];
                        float score = b.scale * dot;
                        if (b.softcap > 0) score = b.softcap * std::tanh(score / b.softcap);
                        score -= slopes[size_t(h)] * float(std::abs(qpos - j));
                        scores[size_t(j - first)] = score;
                        max = std::max(max, score);
                    }
                    const float sink = b.sinks ? b.sinks[h] : -std::numeric_limits<float>::infinity();
                    max = std::max(max, sink);
                    float sum = b.sinks ? std::exp(sink - max) : 0.0f;
                    float* y = out + t * width + int64_t(h) * d;
                    std::fill_n(y, d, 0.0f);
                    for (int32_t j = first; j <= pos; ++j) {
                        const float p = std::exp(scores[size_t(j - first)] - max);
                        sum += p;
                        const float* v = values.data() + size_t(j) * size_t(d);
                        for (int32_t i = 0; i < d; ++i) y[i] += p * v[i];
                    }
                    for (int32_t i = 0; i < d; ++i) y[i] /= sum;
                }
            }
        }
    });
}

}  // namespace pagoda::backend::cpu
