// Internal to the paged attention kernel (attention_walk.h): the tiled online-softmax walk of one task (a run of
// queries of one sequence x one KV head), written once and instantiated by each ISA file with its
// own primitive operations `Ops` (a type local to that file, so each instantiation is private to
// its translation unit and compiled with that file's ISA flags).
//
// Keys are walked in tiles of kAttentionTile absolute positions (0..63, 64..127, ...); query i
// uses the first min(n, pos[i] - start + 1) rows of a tile of n (causal mask). With a sliding window
// W, query i sees keys lo_i = pos[i] - W + 1 .. pos[i]: tiles wholly below lo_i are skipped for it and
// its scores start at row lo_i - start of the tile that holds lo_i (nothing is computed and masked).
// A soft cap c turns each score s into c * tanh(s / c) before the softmax (through exp_f32). When the task has
// enough query heads to pay for it (and the cache is f16 or bf16), each tile's K and V rows are
// first widened to f32 once (exact for f16/bf16) into scratch and every query head reads those;
// otherwise (decode) the heads read the cache rows directly. A q8 row's score is (q . codes) * row
// scale and a V row adds (p * row scale) * codes: never codes * scale rounded first. Read directly,
// its codes are converted on the fly; widened (only where the Ops score two heads at a time), the
// tile holds the codes (exact in f32) and the row scales are kept beside it and applied in the
// same places. Both give the same bits: the Ops do
// the same arithmetic on the same values either way. Per query head the sequence of operations —
// which tiles, how many keys each, the score reduction, the softmax update, the order the
// accumulator sums its rows — depends only on that query's position, head_dim and the Ops, never
// on the other queries of the task: a token gets the same bits alone (decode) or inside any
// prefill batch.
//
// Ops must provide, for row element types DT (f32 for widened rows, or the cache's type), with
// ld = padded_dim(d), query and accumulator rows of ld floats (zero past d), row elements past d
// read as zero (for q8, "row j" below means its codes times its scale, applied as said above; the
// scale sits at row + kv::q8_scale_offset(d)):
//   void convert<DT>(const uint8_t* const* rows, int n, int d, int ld, float* dst)
//       dst[r][0..ld) = row r widened to f32, zero padded, for r < n
//   void scores<DT>(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s)
//       s[j] = scale * (q . row j) for j < n; may read rows[] and write s up to n rounded up to
//       16 (never past kAttentionTile); each dot reduced in an order fixed by d alone
//   float max(const float* s, int n)          the largest of s[0..n), n >= 1 (order-free: exact)
//   float exp_sum(float* s, int n, float m)   s[j] = exp(s[j] - m) for j < n, returns their sum
//   void scale(float* acc, float c, int ld)   acc *= c
//   void accumulate<DT>(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows,
//                       int n, int d)
//       for each of heads <= kMaxAccumulateHeads: acc[h] += p[h][j] * row j for j = 0, 1, .., n-1
//       in that order per element (so the result does not depend on how heads are grouped)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attention/attention.h"
#include "backend/cpu/attention/attention_internal.h"
#include "backend/cpu/ops/ops.h"

namespace pagoda::backend::cpu::attention_detail {

constexpr int kMaxAccumulateHeads = 4;
// Query heads a tile is worked on at a time (walk_tiles).
constexpr int kHeadChunk = 16;

// Ops may also score two query heads at once from a widened K tile (rows ld = padded_dim(d) floats
// apart), which shares each loaded K chunk between them:
//   bool scores_pairs(int d)   whether scores_pair takes this d
//   void scores_pair(const float* q0, const float* q1, const float* tile, const float* rs, int j0, int j1, int d,
//                    float scale, float* s0, float* s1)
//       s0[j], s1[j] for j0 <= j < j1 (multiples of 8, j1 <= kAttentionTile): the same bits
//       scores<f32> gives each query and row j of the tile; with row scales rs (a q8 tile of codes),
//       the same bits scores<q8> gives the rows in place: the dot times rs[j], then times scale
//   void scores_pair_rows<DT>(const float* q0, const float* q1, const uint8_t* const* rows, int n, int d,
//                             float scale, float* s0, float* s1)
//       the two heads' scores<DT> of rows read in place (f16 or bf16), for j < n rounded up to 8
template <class Ops>
constexpr bool has_pair_scores = requires { Ops::scores_pairs(0); };
// Ops that can work a widened q8 tile (codes as f32, row scales rs beside) take rs as a last
// argument of scores<f32> (each dot times rs[j] before the scale: what scores<q8> gives in place)
// and provide
//   void accumulate_scaled(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows,
//                          int n, int d, const float* rs)
//       accumulate<f32> with each weight p[h][j] * rs[j]: what accumulate<q8> adds for a q8 row
template <class Ops>
constexpr bool has_scaled_rows = requires { &Ops::accumulate_scaled; };
template <class Ops>
bool scores_pairs_for(int d) {
    if constexpr (has_pair_scores<Ops>) return Ops::scores_pairs(d);
    else return false;
}

// The helpers below are static: each ISA's file compiles its own copy with its own flags (one
// shared inline definition could be the AVX-512 file's, run on a CPU without AVX-512).
//
// The row of position p of the KV head at `base` (its layer's K or V data plus head * head_bytes).
static inline const uint8_t* cache_row(const Task& t, const uint8_t* base, int32_t p) {
    const int32_t mask = (int32_t(1) << t.block_shift) - 1;
    return base + size_t(t.block_table[p >> t.block_shift]) * t.block_stride + size_t(p & mask) * t.row_bytes;
}

// out[j] = the row of position start + j for j < n, filled a block at a time (a block's rows are
// consecutive: one table lookup per block, not per row, which decode would otherwise pay for
// every key). Rows below `floor` (the first key any query of the tile still sees) are never
// used; they point at the floor row instead, so a block wholly outside every window is never
// read (the block manager may have freed it: its table entry is no block at all).
static inline void fill_rows(const Task& t, const uint8_t* base, int32_t start, int n, int32_t floor, const uint8_t** out) {
    const int32_t block = int32_t(1) << t.block_shift;
    int j = 0;
    if (start < floor) {
        const uint8_t* f = cache_row(t, base, floor);
        for (; j < n && start + j < floor; ++j) out[j] = f;
    }
    while (j < n) {
        const int32_t p = start + j;
        const int in_block = std::min(n - j, int(block - (p & (block - 1))));
        const uint8_t* r = cache_row(t, base, p);
        for (int k = 0; k < in_block; ++k, r += t.row_bytes) out[j + k] = r;
        j += in_block;
    }
}

// Requests the rows of positions from .. from + count - 1 of the KV head at `base` into L2, block
// by block: in address order.
// Inline asm rather than __builtin_prefetch: GCC 12 counts a prefetch as no side effect and
// deletes a loop nest doing nothing else at -O2 (C++ loops are assumed to finish), so the
// requests this walk made before 2026-12-04 were never issued (docs/benchmarks.md).
static inline void prefetch_rows(const Task& t, const uint8_t* base, int32_t from, int count) {
    const int32_t block = int32_t(1) << t.block_shift;
    for (int j = 0; j < count;) {
        const int32_t p = from + j;
        const int in_block = std::min(count - j, int(block - (p & (block - 1))));
        const uint8_t* r = cache_row(t, base, p);
        for (size_t b = 0, bytes = size_t(in_block) * t.row_bytes; b < bytes; b += 64) asm volatile("prefetcht1 %0" : : "m"(r[b]));
        j += in_block;
    }
}

// The per-query-head state in a task's scratch (attention_internal.h's layout, after the two f32
// tiles): padded query rows, accumulators, score rows, running max and sum.
struct HeadState {
    float *queries, *acc, *scores, *run_max, *run_sum;
};
static inline HeadState head_state(float* scratch, int qh, int ld) {
    HeadState s;
    s.queries = scratch + 2 * size_t(kAttentionTile) * ld;  // [qh][ld]
    s.acc = s.queries + size_t(qh) * ld;                     // [qh][ld]
    s.scores = s.acc + size_t(qh) * ld;                      // [qh][kScoreStride]
    s.run_max = s.scores + size_t(qh) * kScoreStride;        // [qh]
    s.run_sum = s.run_max + qh;                              // [qh]
    return s;
}
// Query head h starts from its query q (d floats): a zero-padded copy, a zero accumulator, no keys.
static inline void start_head(const HeadState& s, int h, const float* q, int d, int ld) {
    float* qrow = s.queries + size_t(h) * ld;
    std::memcpy(qrow, q, size_t(d) * sizeof(float));
    for (int c = d; c < ld; ++c) qrow[c] = 0.0f;
    for (int c = 0; c < ld; ++c) s.acc[size_t(h) * ld + c] = 0.0f;
    s.run_max[h] = -std::numeric_limits<float>::infinity();
    s.run_sum[h] = 0.0f;
}
// Query head h's output: its accumulator over its sum (>= 1: the max key contributes exp(0)), plus
// e^(sink - max) where the head has an attention sink, scaled in place on the Ops' vectors, then
// copied out.
template <class Ops>
void finish_head(const HeadState& s, int h, float* out, int d, int ld, const float* sink = nullptr) {
    float* a = s.acc + size_t(h) * ld;
    const float sum = sink ? s.run_sum[h] + std::exp(*sink - s.run_max[h]) : s.run_sum[h];
    Ops::scale(a, 1.0f / sum, ld);
    std::memcpy(out, a, size_t(d) * sizeof(float));
}

// Query heads h0 .. h1 - 1's online-softmax step, each over its tile scores s_of(h) (ni_of(h) of
// them, overwritten by their exponentials): the soft cap first (c tanh(s / c) = c (2 / (1 +
// e^(-2s/c)) - 1), on the ISA's exp), then bias(h, s, n) (ALiBi's; a no-op by default), then the
// new running max, the sum, and the accumulator
// rescaled under the new max. Each head's arithmetic is its own; the heads go phase by phase
// (all maxima, all corrections, all sums), because one head's steps form a chain of dependent
// reductions and calls that the core can only overlap with another head's.
struct NoBias {
    void operator()(int, float*, int) const {}
};
template <class Ops, class ScoresOf, class CountOf, class Bias = NoBias>
void softmax_update_heads(const Task& t, int h0, int h1, ScoresOf s_of, CountOf ni_of, float* run_max, float* run_sum,
                          float* acc, int ld, Bias bias = {}) {
    constexpr int kMaxHeads = kHeadChunk;
    float new_max[kMaxHeads], correction[kMaxHeads];
    if (t.softcap > 0) {
        const float k = -2.0f / t.softcap;
        for (int h = h0; h < h1; ++h) {
            float* s = s_of(h);
            const int ni = ni_of(h);
            for (int j = 0; j < ni; ++j) s[j] *= k;
            exp_f32(s, ni, s);
            for (int j = 0; j < ni; ++j) s[j] = t.softcap * (2.0f / (1.0f + s[j]) - 1.0f);
        }
    }
    for (int h = h0; h < h1; ++h) bias(h, s_of(h), ni_of(h));
    for (int h = h0; h < h1; ++h) {
        const float tile_max = Ops::max(s_of(h), ni_of(h));
        new_max[h - h0] = tile_max > run_max[h] ? tile_max : run_max[h];
    }
    for (int h = h0; h < h1; ++h) correction[h - h0] = std::exp(run_max[h] - new_max[h - h0]);  // 0 on the first tile
    for (int h = h0; h < h1; ++h) {
        const float tile_sum = Ops::exp_sum(s_of(h), ni_of(h), new_max[h - h0]);
        run_sum[h] = run_sum[h] * correction[h - h0] + tile_sum;
        if (correction[h - h0] != 1.0f) Ops::scale(acc + size_t(h) * ld, correction[h - h0], ld);
        run_max[h] = new_max[h - h0];
    }
}

template <class Ops, kv::KvDtype DT>
void walk_tiles(const Task& t) {
    constexpr int kTile = kAttentionTile;
    const int m = t.n_queries;
    const int group = t.group;
    const int qh = m * group;
    const int d = t.head_dim;
    const int ld = padded_dim(d);
    float* k_tile = t.scratch;                    // [kTile][ld]
    float* v_tile = k_tile + size_t(kTile) * ld;  // [kTile][ld]
    const HeadState hs = head_state(t.scratch, qh, ld);
    float *queries = hs.queries, *acc = hs.acc, *scores = hs.scores, *run_max = hs.run_max, *run_sum = hs.run_sum;
    for (int h = 0; h < qh; ++h)  // query head h: token h / group, its head h % group
        start_head(hs, h, t.q + size_t(h / group) * t.token_stride + size_t(h % group) * d, d, ld);
    // q8 rows widen to their codes (exact in f32) with each row's scale kept beside the tile, where
    // the Ops can work such a tile (has_scaled_rows, scored one or two heads at a time): a score is then (q .
    // codes) x row scale x scale and a V row adds (p x row scale) x codes, each value and its order
    // as read in place, so the same bits.
    constexpr bool kQ8 = DT == kv::KvDtype::q8;
    constexpr bool kCanWiden = DT == kv::KvDtype::f16 || DT == kv::KvDtype::bf16 || (kQ8 && has_scaled_rows<Ops>);
    const bool widen = kQ8 ? kCanWiden && qh >= kWidenMinQueryHeads : !reads_in_place(DT, qh, scores_pairs_for<Ops>(d));
    // Widened, two query heads at a time where the Ops can.
    constexpr bool kPairs = kCanWiden && has_pair_scores<Ops>;
    const bool pairs = kPairs && widen && scores_pairs_for<Ops>(d);
    // Widened q8: the tile rows' scales, 0 past n (the Ops read up to 16 past the rows they score).
    float k_scales[kTile + 16], v_scales[kTile + 16];
    // Read in place (f16 / bf16 below the widening count), two query heads of a token still share
    // each converted row where the Ops can, as in walk_decode_heads.
    constexpr bool kRowPairs = (DT == kv::KvDtype::f16 || DT == kv::KvDtype::bf16) && has_pair_scores<Ops>;
    const bool row_pairs = kRowPairs && !widen && group > 1 && scores_pairs_for<Ops>(d);
    // Row pointers of the current tile; the Ops may read up to 16 past the n rows they are given
    // (which start inside the tile under a window), so the 16 entries past n point at a readable row.
    constexpr int kRows = kTile + 16;
    const uint8_t* cache_rows[kRows];
    const uint8_t* k_rows[kRows];
    const uint8_t* v_rows[kRows];
    for (int j = 0; j < kRows; ++j) {
        k_rows[j] = reinterpret_cast<const uint8_t*>(k_tile + size_t(j < kTile ? j : 0) * ld);
        v_rows[j] = reinterpret_cast<const uint8_t*>(v_tile + size_t(j < kTile ? j : 0) * ld);
    }
    auto load_tile = [&](const uint8_t* base, int32_t start, int n, int32_t floor, float* f32_tile, const uint8_t** rows) {
        if constexpr (kCanWiden) {
            if (widen) {
                fill_rows(t, base, start, n, floor, cache_rows);
                Ops::template convert<DT>(cache_rows, n, d, ld, f32_tile);
                // Pairs score whole groups of 8 rows: the rows past n up to the next 8 read as zero.
                if (pairs && n % 8 != 0) std::memset(f32_tile + size_t(n) * ld, 0, size_t(8 - n % 8) * ld * sizeof(float));
                if constexpr (kQ8) {  // the scale after the codes padded to 4 bytes (kv::q8_scale_offset)
                    float* scales = f32_tile == k_tile ? k_scales : v_scales;
                    const size_t at = (size_t(d) + 3) / 4 * 4;
                    for (int j = 0; j < n; ++j) std::memcpy(scales + j, cache_rows[j] + at, sizeof(float));
                    for (int j = n; j < kTile + 16; ++j) scales[j] = 0.0f;
                }
                return;
            }
        }
        (void)f32_tile;
        fill_rows(t, base, start, n, floor, rows);
        for (int j = n; j < n + 16; ++j) rows[j] = rows[0];
    };
    auto scores_of = [&](const float* q, const uint8_t* const* rows, int n, float* s) {
        if constexpr (kQ8 && kCanWiden) {
            if (widen) return Ops::template scores<kv::KvDtype::f32>(q, rows, n, d, t.scale, s, k_scales + (rows - k_rows));
        }
        if (kCanWiden && widen) Ops::template scores<kv::KvDtype::f32>(q, rows, n, d, t.scale, s);
        else Ops::template scores<DT>(q, rows, n, d, t.scale, s);
    };
    auto accumulate = [&](float* const* a, const float* const* p, int heads, const uint8_t* const* rows, int n) {
        if constexpr (kQ8 && kCanWiden) {  // widened q8: each weight times its V row's scale, as read in place
            if (widen) return Ops::accumulate_scaled(a, p, heads, rows, n, d, v_scales + (rows - v_rows));
        }
        if (kCanWiden && widen) Ops::template accumulate<kv::KvDtype::f32>(a, p, heads, rows, n, d);
        else Ops::template accumulate<DT>(a, p, heads, rows, n, d);
    };
    // Widened, a task reads each row once, converting it: the next tile's K and V rows are
    // requested into L2 as a tile's work starts (a tile's worth of score and P.V work ahead; L1
    // holds the tiles in use). Rows read in place here are not requested: the walk reads a block's
    // rows in order, which the hardware prefetchers follow, and requests into L1 there cost 8-40 %
    // (measured, docs/benchmarks.md); the decode walk's L2 requests are a measured choice
    // (walk_decode_heads, Task::kv_ahead). Every block from lowest(0) on is valid.
    auto prefetch_widened = [&](int32_t start, int n) {
        if (!widen) return;
        prefetch_rows(t, t.k_head, start, n);
        prefetch_rows(t, t.v_head, start, n);
    };
    const int32_t n_keys = t.pos[m - 1] + 1;
    // The first key query i sees (positions increase, so these do too).
    auto lowest = [&](int i) { return lowest_key(t, i); };
    int first = 0;  // first query that still sees keys of the current tile
    for (int32_t start = lowest(0) / kTile * kTile; start < n_keys; start += kTile) {
        while (t.pos[first] < start) ++first;
        const int n = n_keys - start < kTile ? int(n_keys - start) : kTile;
        auto keys_of = [&](int i) { return t.pos[i] - start + 1 < n ? int(t.pos[i] - start + 1) : n; };
        // Under a window: the tile row query i starts at; queries from `last` on start past this tile.
        auto skip_of = [&](int i) { return lowest(i) > start ? int(lowest(i) - start) : 0; };
        int last = first;
        while (last < m && skip_of(last) < keys_of(last)) ++last;
        if (last == first) continue;
        const int32_t floor = lowest(first);  // positions increase: the first query's start is the lowest
        load_tile(t.k_head, start, n, floor, k_tile, k_rows);
        load_tile(t.v_head, start, n, floor, v_tile, v_rows);
        if (const int32_t next = start + kTile; next < n_keys)
            prefetch_widened(next, n_keys - next < kTile ? int(n_keys - next) : kTile);
        // The heads in chunks of kHeadChunk: each chunk's scores, then its softmax updates (independent
        // chains the core can overlap), then its P.V, so that the two tiles and the chunk's query,
        // score and accumulator rows stay in L1 together.
        for (int h0 = first * group; h0 < last * group; h0 += kHeadChunk) {
            const int h1 = std::min(last * group, h0 + kHeadChunk);
            if constexpr (kPairs) {
                if (pairs) {  // heads h and h + 1 (the last alone twice), each pair over both heads' keys
                    for (int h = h0; h < h1; h += 2) {
                        const int g = h + 1 < h1 ? h + 1 : h;
                        const int j0 = std::min(skip_of(h / group), skip_of(g / group)) / 8 * 8;
                        const int j1 = (std::max(keys_of(h / group), keys_of(g / group)) + 7) / 8 * 8;
                        Ops::scores_pair(queries + size_t(h) * ld, queries + size_t(g) * ld, k_tile, kQ8 ? k_scales : nullptr,
                                         j0, j1, d, t.scale, scores + size_t(h) * kScoreStride, scores + size_t(g) * kScoreStride);
                    }
                }
            }
            if (!pairs)
                for (int h = h0; h < h1; ++h) {
                    const int i = h / group, off = skip_of(i);
                    float* s = scores + size_t(h) * kScoreStride + off;
                    if constexpr (kRowPairs) {  // in place: two heads of one query share each converted row
                        if (row_pairs && h % group + 1 < group && h + 1 < h1) {
                            Ops::template scores_pair_rows<DT>(queries + size_t(h) * ld, queries + size_t(h + 1) * ld,
                                                               k_rows + off, keys_of(i) - off, d, t.scale, s, s + kScoreStride);
                            ++h;
                            continue;
                        }
                    }
                    scores_of(queries + size_t(h) * ld, k_rows + off, keys_of(i) - off, s);
                }
            auto s_of = [&](int h) { return scores + size_t(h) * kScoreStride + skip_of(h / group); };
            auto n_of = [&](int h) { return keys_of(h / group) - skip_of(h / group); };
            if (t.alibi_slopes) {  // ALiBi: -slope |pos_q - pos_k|, the keys from start + skip on
                softmax_update_heads<Ops>(t, h0, h1, s_of, n_of, run_max, run_sum, acc, ld, [&](int h, float* s, int ni) {
                    const float slope = t.alibi_slopes[h % group];
                    const int32_t q_pos = t.query_pos[h / group], k0 = start + skip_of(h / group);
                    for (int j = 0; j < ni; ++j) s[j] -= slope * float(std::abs(q_pos - (k0 + j)));
                });
            } else {
                softmax_update_heads<Ops>(t, h0, h1, s_of, n_of, run_max, run_sum, acc, ld);
            }
            // P.V: heads whose keys start at the same tile row share each loaded V row, up to
            // kMaxAccumulateHeads at a time, over the keys all of them see; each head then adds the
            // rest of its own keys alone (on the diagonal tile, queries see 1, 2, .. more keys).
            // Splitting a head's keys between calls keeps every element's order (the Ops contract).
            float* acc_ptrs[kMaxAccumulateHeads];
            const float* p_ptrs[kMaxAccumulateHeads];
            int keys[kMaxAccumulateHeads];
            int batch = 0, batch_off = 0;
            auto flush = [&] {
                const int common = *std::min_element(keys, keys + batch);
                accumulate(acc_ptrs, p_ptrs, batch, v_rows + batch_off, common);
                for (int b = 0; b < batch; ++b)
                    if (keys[b] > common) {
                        const float* p_rest = p_ptrs[b] + common;
                        accumulate(acc_ptrs + b, &p_rest, 1, v_rows + batch_off + common, keys[b] - common);
                    }
                batch = 0;
            };
            for (int h = h0; h < h1; ++h) {
                const int off = skip_of(h / group), nh = keys_of(h / group) - off;
                if (batch == kMaxAccumulateHeads || (batch > 0 && off != batch_off)) flush();
                acc_ptrs[batch] = acc + size_t(h) * ld;
                p_ptrs[batch] = scores + size_t(h) * kScoreStride + off;
                keys[batch] = nh;
                batch_off = off;
                ++batch;
            }
            if (batch > 0) flush();
        }
    }
    for (int h = 0; h < qh; ++h)
        finish_head<Ops>(hs, h, t.out + size_t(h / group) * t.token_stride + size_t(h % group) * d, d, ld,
                         t.sinks ? t.sinks + h % group : nullptr);
}

}  // namespace pagoda::backend::cpu::attention_detail
