// Internal to the paged attention kernel: walk(t), the online-softmax walk of one task,
// instantiated by each ISA file with its own primitive operations `Ops`. A decode task over
// several KV heads walks its heads in turns (walk_decode_heads, here); every other task walks its
// keys tile by tile (walk_tiles). attention_walk_tiles.h states the walk, the Ops contract and
// why both give a token the same bits alone or in any batch.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attention/attention_walk_tiles.h"

namespace pagoda::backend::cpu::attention_detail {

// A decode task over t.kv_heads consecutive KV heads: one query (t.n_queries == 1) whose heads read
// the cache rows in place (reads_in_place), or such a query of each of several sequences (t.share:
// their keys below share->shared sit in the same blocks, attention_internal.h; query head h of
// sequence s is head s * qh + h of the scratch, qh = kv_heads x group). Per query head the arithmetic is walk_tiles' exactly —
// the same tiles and keys of each, the scores in Ops calls of 16 keys from the tile's first key
// (each score's dot product is fixed by d alone), the same softmax update on the whole tile, P.V
// accumulated in key order (split into calls of 16 keys, which keeps every element's order) — so
// its bits are the same. Only the order in which the heads take turns differs: 16 keys of every
// head, then the next 16, so one block's K (then V) rows of all the task's heads, which lie side by
// side in the pool, are read as one sequential run. One head alone is a run of 2 KiB per block (16
// keys of head_dim 64 in f16), too short for the hardware prefetchers to follow.
template <class Ops, kv::KvDtype DT>
void walk_decode_heads(const Task& t) {
    constexpr int kTile = kAttentionTile;
    constexpr int kRows = kTile + 16;
    const Task* seqs = t.share ? t.share->tasks : &t;
    const int m = t.share ? t.share->n : 1;
    const int32_t shared = t.share ? t.share->shared : 0;
    const int group = t.group, heads = t.kv_heads, qh = heads * group;
    const int d = t.head_dim, ld = padded_dim(d);
    const HeadState hs = head_state(t.scratch, m * qh, ld);  // the f32 K/V tiles before it unused
    float *queries = hs.queries, *acc = hs.acc, *scores = hs.scores, *run_max = hs.run_max, *run_sum = hs.run_sum;
    for (int s = 0; s < m; ++s)
        for (int h = 0; h < qh; ++h) start_head(hs, s * qh + h, seqs[s].q + size_t(h) * d, d, ld);  // kv head h / group
    const uint8_t* rows[kMaxDecodeHeads][kRows];
    // f16 / bf16 rows: two query heads of a KV head (of one token, or of two sequences sharing the
    // rows) share each row's conversion (f32 rows gained nothing measurable; q8 keeps its own scores).
    constexpr bool kPairs = (DT == kv::KvDtype::f16 || DT == kv::KvDtype::bf16) && has_pair_scores<Ops>;
    const bool pairs = kPairs && scores_pairs_for<Ops>(d);
    // rows[kh] = head kh's rows of the tile (as walk_tiles' load_tile, 16 past n padded), read through
    // the block table of task r.
    auto fill = [&](const Task& r, const uint8_t* base, int32_t start, int n, int32_t floor) {
        for (int kh = 0; kh < heads; ++kh) {
            fill_rows(r, base + size_t(kh) * r.head_bytes, start, n, floor, rows[kh]);
            for (int k = n; k < n + 16; ++k) rows[kh][k] = rows[kh][0];
        }
    };
    // The tile of n keys from start (from row off on, the window's first) for sequences s0 .. s1 - 1,
    // whose block tables agree on it. Each query head's arithmetic is the one-sequence walk's: the
    // same rows, chunks of 16 keys, score reductions, softmax update and P.V order.
    auto tile = [&](int s0, int s1, int32_t start, int n, int off, int32_t lowest) __attribute__((always_inline)) {
        const Task& r = seqs[s0];
        const int ni = n - off;
        fill(r, r.k_head, start, n, lowest);
        // KV head kh's query heads here: i = 0 .. vg - 1, head g of sequence s0 + i / group for g =
        // i % group; two at a time where the Ops score pairs (one token's group as its walk alone
        // pairs them, or two sequences' heads). One call site per operation, so that the compiler
        // keeps them inline.
        const int vg = (s1 - s0) * group;
        // The scratch index of KV head kh's query heads in that order, one a call.
        auto heads_of = [&](int kh) {
            return [&, kh, sq = s0, g = 0]() mutable {
                const int h = sq * qh + kh * group + g;
                if (++g == group) g = 0, ++sq;
                return h;
            };
        };
        for (int j0 = off; j0 < n; j0 += 16) {
            const int nj = std::min(16, n - j0);
            for (int kh = 0; kh < heads; ++kh) {
                auto next = heads_of(kh);
                for (int i = 0; i < vg;) {
                    const int h = next();
                    if constexpr (kPairs) {
                        if (pairs && i + 1 < vg) {
                            const int h2 = next();
                            Ops::template scores_pair_rows<DT>(queries + size_t(h) * ld, queries + size_t(h2) * ld,
                                                               rows[kh] + j0, nj, d, r.scale,
                                                               scores + size_t(h) * kScoreStride + j0,
                                                               scores + size_t(h2) * kScoreStride + j0);
                            i += 2;
                            continue;
                        }
                    }
                    Ops::template scores<DT>(queries + size_t(h) * ld, rows[kh] + j0, nj, d, r.scale,
                                             scores + size_t(h) * kScoreStride + j0);
                    ++i;
                }
            }
        }
        for (int h0 = s0 * qh; h0 < s1 * qh; h0 += kHeadChunk)
            softmax_update_heads<Ops>(
                r, h0, std::min(s1 * qh, h0 + kHeadChunk), [&](int h) { return scores + size_t(h) * kScoreStride + off; },
                [&](int) { return ni; }, run_max, run_sum, acc, ld);
        fill(r, r.v_head, start, n, lowest);
        // P.V: each V row shared by up to kMaxAccumulateHeads of its query heads, in the order above.
        float* acc_ptrs[kMaxAccumulateHeads];
        const float* p_ptrs[kMaxAccumulateHeads];
        for (int j0 = off; j0 < n; j0 += 16) {
            const int nj = std::min(16, n - j0);
            for (int kh = 0; kh < heads; ++kh) {
                auto next = heads_of(kh);
                for (int i0 = 0; i0 < vg; i0 += kMaxAccumulateHeads) {
                    const int batch = std::min(kMaxAccumulateHeads, vg - i0);
                    for (int k = 0; k < batch; ++k) {
                        const int h = next();
                        acc_ptrs[k] = acc + size_t(h) * ld;
                        p_ptrs[k] = scores + size_t(h) * kScoreStride + j0;
                    }
                    Ops::template accumulate<DT>(acc_ptrs, p_ptrs, batch, rows[kh] + j0, nj, d);
                }
            }
        }
    };
    // With t.kv_ahead (attention.h: decode_kv_prefetch): the next tile's K and V rows of every
    // head of the task, requested into L2 before this tile's work (r's block table; up to n_keys).
    // In address order per head; the hardware prefetchers alone leave a decode step at long
    // contexts waiting on them (docs/benchmarks.md).
    auto request_next = [&](const Task& r, int32_t next, int32_t n_keys) {
        if (!t.kv_ahead || next >= n_keys) return;
        const int n = n_keys - next < kTile ? int(n_keys - next) : kTile;
        for (int kh = 0; kh < heads; ++kh) {
            prefetch_rows(r, r.k_head + size_t(kh) * r.head_bytes, next, n);
            prefetch_rows(r, r.v_head + size_t(kh) * r.head_bytes, next, n);
        }
    };
    // The shared keys (whole tiles, no window) once for every sequence, then each sequence's own.
    for (int32_t start = 0; start < shared; start += kTile) {
        request_next(seqs[0], start + kTile, shared);
        tile(0, m, start, kTile, 0, 0);
    }
    for (int s = 0; s < m; ++s) {
        const Task& r = seqs[s];
        const int32_t pos = r.pos[0], n_keys = pos + 1;
        const int32_t lowest = lowest_key(r, 0);
        for (int32_t start = std::max(shared, lowest / kTile * kTile); start < n_keys; start += kTile) {
            const int n = n_keys - start < kTile ? int(n_keys - start) : kTile;
            const int off = lowest > start ? int(lowest - start) : 0;  // < n: lowest <= pos
            request_next(r, start + kTile, n_keys);
            tile(s, s + 1, start, n, off, lowest);
        }
    }
    for (int s = 0; s < m; ++s)
        for (int h = 0; h < qh; ++h)
            finish_head<Ops>(hs, s * qh + h, seqs[s].out + size_t(h) * d, d, ld, seqs[s].sinks ? seqs[s].sinks + h : nullptr);
}

template <class Ops>
void walk(const Task& t) {
    if (t.kv_heads > 0) {
        switch (t.dtype) {
            case kv::KvDtype::f32: walk_decode_heads<Ops, kv::KvDtype::f32>(t); return;
            case kv::KvDtype::f16: walk_decode_heads<Ops, kv::KvDtype::f16>(t); return;
            case kv::KvDtype::bf16: walk_decode_heads<Ops, kv::KvDtype::bf16>(t); return;
            case kv::KvDtype::q8: walk_decode_heads<Ops, kv::KvDtype::q8>(t); return;
        }
    }
    switch (t.dtype) {
        case kv::KvDtype::f32: walk_tiles<Ops, kv::KvDtype::f32>(t); return;
        case kv::KvDtype::f16: walk_tiles<Ops, kv::KvDtype::f16>(t); return;
        case kv::KvDtype::bf16: walk_tiles<Ops, kv::KvDtype::bf16>(t); return;
        case kv::KvDtype::q8: walk_tiles<Ops, kv::KvDtype::q8>(t); return;
    }
}

}  // namespace pagoda::backend::cpu::attention_detail
