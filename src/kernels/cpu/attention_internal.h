// Internal to the paged attention kernel: the per-task contract shared by the ISA-specific files
// (attention_scalar.cpp, attention_avx2.cpp, attention_avx512.cpp) and the dispatcher
// (attention.cpp). One task = one query token x one KV head = `group` consecutive query heads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kv/kv_layout.h"

namespace pagoda::kernels::attention_detail {

struct Task {
    const float* q;          // [group][head_dim] the query heads served by this KV head
    float* out;              // [group][head_dim]
    int32_t group;           // query heads per KV head
    int32_t head_dim;
    int32_t pos;             // attends to keys 0..pos
    const int32_t* block_table;
    int32_t block_shift;     // log2(block_size)
    const uint8_t* k_head;   // layer K base + kv_head * head_block_bytes
    const uint8_t* v_head;
    size_t block_stride;     // bytes between consecutive blocks (layer_block_bytes)
    size_t row_bytes;        // bytes of one head_dim row
    kv::KvDtype dtype;
    float scale;
    float* scratch;          // scratch_floats(group, head_dim) floats, 64-byte aligned
};

// Scratch layout: scores [group][kAttentionTile] | acc [group][head_dim] | max [group] | sum [group].
inline size_t scratch_floats(int32_t group, int32_t head_dim) {
    size_t acc = (size_t(head_dim) + 15) / 16 * 16;
    return size_t(group) * (64 + acc + 32);
}

void attend_scalar(const Task& t);
void attend_avx2(const Task& t);
void attend_avx512(const Task& t);

}  // namespace pagoda::kernels::attention_detail
