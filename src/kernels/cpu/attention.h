// Paged causal attention over the KV cache (FlashAttention-style, CPU).
//
// For each query token t (of any sequence in the batch) and each query head h:
//     out[t][h] = sum_j softmax_j(scale * q[t][h] . K[j]) * V[j],  j = 0 .. pos[t]
// where K/V rows are those of KV head h / (n_heads / n_kv_heads) (GQA: no K/V duplication), read
// from the pool's blocks through the token's sequence block table (position j lives in block
// table[j / block_size], slot j % block_size).
//
// The keys are walked in tiles of kAttentionTile positions with an online softmax (running max
// and sum, accumulator rescaled when the max grows), F32 accumulation, so no score row longer
// than a tile is ever materialised. Work is split over (token, KV head) pairs on the ThreadPool;
// each pair is computed start to end by one thread in an order that depends only on that token's
// position and the pool's block size — so a token's output is bitwise identical whatever else is
// in the batch and however many threads run (batch invariance), for a given ISA path.
//
// The SIMD path (scalar / AVX2 / AVX-512) follows pagoda::active_isa().
// The KV of every position 0..pos[t] must already be written (KvPool::write) for the layer,
// including the tokens of this very batch.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "kv/kv_pool.h"

namespace pagoda::kernels {

constexpr int32_t kAttentionTile = 64;  // key positions per online-softmax tile

// A sequence's block table as the kernel sees it (e.g. BlockManager::block_table(seq).data()).
struct AttentionSeq {
    const int32_t* block_table = nullptr;
    int32_t n_blocks = 0;  // entries in block_table; positions < n_blocks * block_size are valid
};

struct PagedAttentionBatch {
    const float* q = nullptr;           // [n_tokens][n_heads][head_dim]
    int64_t n_tokens = 0;
    int32_t n_heads = 0;                // multiple of the pool's n_kv_heads
    const int32_t* token_seq = nullptr; // [n_tokens] index into seqs
    const int32_t* token_pos = nullptr; // [n_tokens] position p: attends to keys 0..p
    const AttentionSeq* seqs = nullptr; // [n_seqs]
    int32_t n_seqs = 0;
    float scale = 0.0f;                 // usually 1 / sqrt(head_dim)
};

// out: [n_tokens][n_heads][head_dim]. Throws pagoda::Error on inconsistent arguments (head count
// not a multiple of the KV heads, a sequence index or position outside its block table, a block
// id outside the pool, a bad layer).
void paged_attention(const PagedAttentionBatch& batch, const kv::KvPool& pool, int32_t layer, float* out,
                     ThreadPool& threads);

}  // namespace pagoda::kernels
