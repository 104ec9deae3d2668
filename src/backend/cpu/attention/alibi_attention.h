// Paged attention with an ALiBi bias (jina-bert-v2), on the CPU: the formula of attention.h with
// -slope_h * |query_pos[t] - j| added to each scaled (and capped) score of key j, slope_h from
// backend/alibi.h. token_pos still bounds the keys (the sequence's last position for an encoder);
// query_pos is the token's own position, which the bias measures from. Windows, soft caps and sinks
// apply as in paged_attention.
//
// The unfused twin of the tiled walk's ALiBi (PagedAttentionBatch::alibi_slopes, which the backend
// runs), kept as its test oracle: one task per (sequence, KV head) widens the
// sequence's K and V rows 0..(its furthest position) to f32 once, then for each of its tokens and
// each query head of the group writes the score row, its softmax and P.V. The arithmetic of one
// (token, head) depends only on its position, its sequence's keys and head_dim, in a fixed order,
// so results are batch invariant (bitwise the same alone or in any batch) as attention.h states.
#pragma once
#include <cstdint>

#include "backend/cpu/attention/attention.h"

namespace pagoda::backend::cpu {

// Throws pagoda::Error on what paged_attention refuses, a missing query_pos or max_bias not > 0.
void alibi_attention(const PagedAttentionBatch& batch, const int32_t* query_pos, float max_bias, const KvPool& pool,
                     int32_t layer, float* out, ThreadPool& threads);

}  // namespace pagoda::backend::cpu
