// Internal to the paged attention kernel: the tiled online-softmax walk over one sequence's KV
// blocks for one task (query token x KV head), written once and instantiated by each ISA file with
// its own primitive operations `Ops` (a type local to that file, so each instantiation is private
// to its translation unit and compiled with that file's ISA flags).
//
// Ops must provide, for the element type DT of the cache:
//   float dot<DT>(const float* q, const uint8_t* k_row, int d)      q . k
//   void  axpy<DT>(float* acc, float p, const uint8_t* v_row, int d) acc += p * v
//   void  scale(float* acc, float c, int d)                          acc *= c
//   float exp_sum(float* s, int n, float m)   s[j] = exp(s[j] - m) for j < n, returns their sum
// and may provide tile-wide versions that must give bit-identical results to the loops they replace
// (the walk uses them when present):
//   void dots<DT>(const float* q, const uint8_t* const* k_rows, int n, int d, float scale, float* s)
//   void accumulate<DT>(float* acc, const float* p, const uint8_t* const* v_rows, int n, int d)
// Each must use an order of operations fixed by its arguments alone (no dependence on threads or
// on other tokens), which is what makes the kernel batch-invariant.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_internal.h"

namespace pagoda::kernels::attention_detail {

template <class Ops, kv::KvDtype DT>
void walk_tiles(const Task& t) {
    constexpr int kTile = kAttentionTile;
    const int group = t.group;
    const int d = t.head_dim;
    const int d_padded = (d + 15) / 16 * 16;
    float* scores = t.scratch;                            // [group][kTile]
    float* acc = scores + size_t(group) * kTile;          // [group][d_padded]
    float* run_max = acc + size_t(group) * d_padded;      // [group]
    float* run_sum = run_max + group;                     // [group]
    for (int g = 0; g < group; ++g) {
        for (int i = 0; i < d_padded; ++i) acc[g * d_padded + i] = 0.0f;
        run_max[g] = -std::numeric_limits<float>::infinity();
        run_sum[g] = 0.0f;
    }
    const uint8_t* rows[kTile];
    const int32_t mask = (int32_t(1) << t.block_shift) - 1;
    auto row = [&](const uint8_t* base, int32_t p) {
        return base + size_t(t.block_table[p >> t.block_shift]) * t.block_stride + size_t(p & mask) * t.row_bytes;
    };
    const int32_t n_keys = t.pos + 1;
    for (int32_t start = 0; start < n_keys; start += kTile) {
        const int n = n_keys - start < kTile ? int(n_keys - start) : kTile;
        // Scores of this tile (the tile's K rows stay in L1 across the query heads of the group).
        for (int j = 0; j < n; ++j) rows[j] = row(t.k_head, start + j);
        for (int g = 0; g < group; ++g) {
            if constexpr (requires { Ops::template dots<DT>(t.q, rows, n, d, t.scale, scores); }) {
                Ops::template dots<DT>(t.q + size_t(g) * d, rows, n, d, t.scale, scores + g * kTile);
            } else {
                for (int j = 0; j < n; ++j)
                    scores[g * kTile + j] = Ops::template dot<DT>(t.q + size_t(g) * d, rows[j], d) * t.scale;
            }
        }
        // Online softmax: new running max, rescale what was accumulated under the old one.
        for (int g = 0; g < group; ++g) {
            float* s = scores + g * kTile;
            float tile_max = s[0];
            for (int j = 1; j < n; ++j) tile_max = s[j] > tile_max ? s[j] : tile_max;
            const float new_max = tile_max > run_max[g] ? tile_max : run_max[g];
            const float correction = std::exp(run_max[g] - new_max);  // 0 on the first tile
            const float tile_sum = Ops::exp_sum(s, n, new_max);
            run_sum[g] = run_sum[g] * correction + tile_sum;
            if (correction != 1.0f) Ops::scale(acc + g * d_padded, correction, d_padded);
            run_max[g] = new_max;
        }
        for (int j = 0; j < n; ++j) rows[j] = row(t.v_head, start + j);
        for (int g = 0; g < group; ++g) {
            float* a = acc + g * d_padded;
            const float* p = scores + g * kTile;
            if constexpr (requires { Ops::template accumulate<DT>(a, p, rows, n, d); }) {
                Ops::template accumulate<DT>(a, p, rows, n, d);
            } else {
                for (int j = 0; j < n; ++j) Ops::template axpy<DT>(a, p[j], rows[j], d);
            }
        }
    }
    for (int g = 0; g < group; ++g) {
        const float inv = 1.0f / run_sum[g];  // run_sum >= 1: the max key contributes exp(0)
        for (int i = 0; i < d; ++i) t.out[size_t(g) * d + i] = acc[g * d_padded + i] * inv;
    }
}

template <class Ops>
void walk(const Task& t) {
    switch (t.dtype) {
        case kv::KvDtype::f32: walk_tiles<Ops, kv::KvDtype::f32>(t); return;
        case kv::KvDtype::f16: walk_tiles<Ops, kv::KvDtype::f16>(t); return;
        case kv::KvDtype::bf16: walk_tiles<Ops, kv::KvDtype::bf16>(t); return;
    }
}

}  // namespace pagoda::kernels::attention_detail
