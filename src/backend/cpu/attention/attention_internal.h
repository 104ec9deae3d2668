// Internal to the paged attention kernel: the per-task contract shared by the ISA-specific files
// (attention_scalar.cpp, attention_avx2.cpp, attention_avx512.cpp) and the dispatcher
// (attention.cpp). One task = a run of 1..kQueryTile consecutive batch tokens of one sequence (with
// increasing positions) x one KV head = `group` consecutive query heads of each of those tokens;
// or, for a decode token read in place, one token x kv_heads consecutive KV heads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/attention/attention.h"
#include "kv/kv_layout.h"

namespace pagoda::backend::cpu::attention_detail {

// Rows of the f32 K/V tiles, query and accumulator vectors are padded to this many floats (zeros),
// so every SIMD path works on whole vectors whatever head_dim is.
constexpr int kPad = 16;
inline int padded_dim(int head_dim) { return (head_dim + kPad - 1) / kPad * kPad; }

struct Task;
// Decode tokens of several sequences whose keys below `shared` (a multiple of kAttentionTile, no
// sliding window) sit in the same blocks, e.g. a prompt prefix the prefix cache gives them all:
// one task walks those keys once for all of them (each row is read from memory once, and where the
// Ops score two heads at a time, converted once for two), then each sequence's own keys. tasks[i]
// is sequence i's decode task (the same KV heads); a query head's arithmetic is the one its token
// alone gets, so results do not depend on the sharing (attention.h: batch invariance).
struct DecodeShare {
    const Task* tasks;
    int32_t n;       // 2..kMaxShareSeqs
    int32_t shared;  // keys walked together
};
constexpr int kMaxShareSeqs = 8;
// Most query heads (sequences x KV heads x group) a shared decode task walks at once.
constexpr int kMaxShareHeads = 64;

struct Task;
// The first key query i of a task reads: 0 without a window, else its first_key or pos[i] - window + 1.
inline int32_t lowest_key(const Task& t, int i);

struct Task {
    const float* q;          // query i of the task: q + i * token_stride, [group][head_dim]
    float* out;              // same layout as q
    size_t token_stride;     // floats between consecutive tokens (n_heads * head_dim)
    const int32_t* pos;      // [n_queries] non-decreasing positions; query i attends to 0..pos[i]
    int32_t n_queries;       // 1..kQueryTile
    int32_t group;           // query heads per KV head
    int32_t head_dim;
    const int32_t* block_table;
    int32_t block_shift;     // log2(block_size)
    const uint8_t* k_head;   // layer K base + kv_head * head_block_bytes
    const uint8_t* v_head;
    size_t block_stride;     // bytes between consecutive blocks (layer_block_bytes)
    size_t row_bytes;        // bytes of one head_dim row
    kv::KvDtype dtype;
    float scale;
    int32_t window;          // > 0: query i attends to keys lowest_key(*this, i) .. pos[i] only
    const int32_t* first_key = nullptr;  // [n_queries] or null (PagedAttentionBatch::first_key)
    // ALiBi (PagedAttentionBatch::alibi_slopes), walk_tiles only: the task's query heads' slopes
    // (head h % group) and its queries' own positions; null: none.
    const float* alibi_slopes = nullptr;
    const int32_t* query_pos = nullptr;
    float softcap;           // > 0: each score s becomes softcap * tanh(s / softcap)
    // The sinks of the task's query heads (its first KV head's first query head on; attention.h), or
    // null. Query head h of a token (h < kv_heads * group, or < group) reads sinks[h].
    const float* sinks = nullptr;
    float* scratch;          // scratch_floats(n_queries, group, head_dim) floats, 64-byte aligned
    // > 0: a decode task (n_queries == 1) over this many consecutive KV heads from k_head / v_head,
    // head_bytes apart (scratch for n_queries x group x kv_heads query heads), whose rows are read
    // in place (reads_in_place); 0: one KV head (walk_tiles).
    int32_t kv_heads = 0;
    size_t head_bytes = 0;
    // A decode task (kv_heads > 0) walked together with other sequences' (scratch for all of their
    // query heads); null: this token alone.
    const DecodeShare* share = nullptr;
    // Decode (the simd walk's tasks with kv_heads > 0; amx_bf16's decode form, at most 16 query
    // rows): request the K and V rows a tile ahead into L2 before a tile's work (attention.h:
    // decode_kv_prefetch, read once per call). Never changes a result.
    bool kv_ahead = false;
};

inline int32_t lowest_key(const Task& t, int i) {
    if (t.window <= 0) return 0;
    if (t.first_key) return t.first_key[i];
    return t.pos[i] - t.window + 1 > 0 ? t.pos[i] - t.window + 1 : 0;
}

// Query heads per KV head (of a task) from which widening each K/V tile to f32 once beats reading
// the cache rows in place for every head (f16 and bf16; f32 rows need no widening; q8 rows widen
// to their codes from kWidenMinQueryHeads in a multi-token run only where the ISA scores two heads
// at a time, see attention_walk.h, and are otherwise read in place). Where the ISA scores two query
// heads per converted row (pair_scores: AVX-512, head_dim 64, 96 or 128), reading in place converts
// each row half as often, and widening pays only from kWidenMinQueryHeadsPaired (measured: decode
// at 8 query heads per KV head, head_dim 64, one thread, 1.08-1.26x faster read in place;
// docs/benchmarks.md).
constexpr int kWidenMinQueryHeads = 5;
constexpr int kWidenMinQueryHeadsPaired = 9;
inline bool reads_in_place(kv::KvDtype dtype, int query_heads, bool pair_scores) {
    return !(dtype == kv::KvDtype::f16 || dtype == kv::KvDtype::bf16) ||
           query_heads < (pair_scores ? kWidenMinQueryHeadsPaired : kWidenMinQueryHeads);
}
// Most KV heads one decode task walks together.
constexpr int kMaxDecodeHeads = 8;

// Floats between two query heads' score rows: a tile, plus the 16 a SIMD score pass may write past
// a window that starts inside the tile.
constexpr int kScoreStride = kAttentionTile + 16;

// Scratch layout (ld = padded_dim(head_dim), qh = n_queries * group query heads):
//   K tile [kAttentionTile][ld] | V tile [kAttentionTile][ld] | queries [qh][ld] | acc [qh][ld]
//   | scores [qh][kScoreStride] | running max [qh] | running sum [qh]
inline size_t scratch_floats(int32_t n_queries, int32_t group, int32_t head_dim) {
    const size_t ld = size_t(padded_dim(head_dim)), qh = size_t(n_queries) * size_t(group);
    return 2 * size_t(kAttentionTile) * ld + 2 * qh * ld + qh * size_t(kScoreStride) + 2 * qh;
}

// The amx_bf16 method (amx_attention.h): a task is a run of queries x one KV head (kv_heads 0, no
// share, no window, no soft cap), its query heads the rows of 16-row A tiles. Scratch per task, in
// 64-byte units (a tile row), for `rows` = n_queries x group query heads:
//   Q tiles [a_tiles][halves][16][16 dwords] | K tiles [2][halves][16][16] | V tiles [groups][16][16]
//   | rows' running max, sum [a_tiles * 16] each | accumulators [a_tiles * 16][groups * 16]
//   | scores [16][32] | P [16][16 dwords] | P.V [16][64] | positions [a_tiles * 16] (int32)
// where halves = ceil(head_dim / 32) (K tiles of 16 dim pairs) and groups = ceil(head_dim / 16)
// (P.V column tiles).
constexpr int kAmxKeys = 32;          // keys per step: two 16-key score tiles
constexpr int kAmxMaxTaskRows = 256;  // query heads per task aimed for (16 A tiles)
struct AmxScratchLayout {
    int halves, groups, a_tiles;
    size_t q, k, v, run_max, run_sum, acc, scores, p, pv, pos, total;  // offsets and size in floats
};
inline AmxScratchLayout amx_scratch_layout(int32_t rows, int32_t head_dim) {
    AmxScratchLayout s;
    s.halves = (head_dim + 31) / 32;
    s.groups = (head_dim + 15) / 16;
    s.a_tiles = (rows + 15) / 16;
    const size_t tile = 256, r16 = size_t(s.a_tiles) * 16;
    size_t at = 0;
    auto take = [&](size_t floats) { const size_t o = at; at += (floats + 15) / 16 * 16; return o; };
    s.q = take(size_t(s.a_tiles) * s.halves * tile);
    s.k = take(2 * size_t(s.halves) * tile);
    s.v = take(size_t(s.groups) * tile);
    s.run_max = take(r16);
    s.run_sum = take(r16);
    s.acc = take(r16 * size_t(s.groups) * 16);
    s.scores = take(16 * size_t(kAmxKeys));
    s.p = take(tile);
    s.pv = take(16 * 64);
    s.pos = take(r16);
    s.total = at;
    return s;
}
// Tokens per amx_bf16 task for `group` query heads per KV head.
inline int32_t amx_query_tile(int32_t group) {
    const int32_t t = kAmxMaxTaskRows / (group > 0 ? group : 1);
    return t < 1 ? 1 : t > kAttentionMaxQueryTile ? kAttentionMaxQueryTile : t;
}

void attend_amx_hardware(const Task& t);  // matmul_amx_hw_amx.cpp: only where the OS granted the tiles
void attend_amx_emulated(const Task& t);  // matmul_amx_emulated_avx512.cpp: any AVX-512 CPU

void attend_scalar(const Task& t);
void attend_avx2(const Task& t);
void attend_avx512(const Task& t);

}  // namespace pagoda::backend::cpu::attention_detail
