// KvPool: the CPU backend's physical paged KV cache (backend::KvCache wraps it). One allocation per layer for K and one for V, each holding
// n_blocks blocks laid out as
//
//     [block][kv_head][slot_in_block][head_dim]
//
// so the keys (or values) of one KV head within one block are a contiguous block_size x head_dim
// tile: the attention kernel walks a sequence's blocks and reads each head's tile with unit stride,
// and copy_block() is one memcpy per layer and K/V. Elements are F32, F16 or BF16 (round to
// nearest even on write), or q8: int8 with the row's fp32 scale at the row's end (kv_layout.h), so
// a copied block carries its scales. The pool knows nothing about sequences: BlockManager hands out block
// ids and slot indices (slot = block_id * block_size + offset); the caller writes with write().
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kv/kv_layout.h"

namespace pagoda::backend::cpu {

using kv::KvDtype;
using kv::KvLayout;


class KvPool {
public:
    // Validates the layout and n_blocks (1..INT32_MAX, total size must not overflow).
    KvPool(const KvLayout& layout, int64_t n_blocks);

    const KvLayout& layout() const { return layout_; }
    int32_t n_blocks() const { return n_blocks_; }
    int32_t block_size() const { return layout_.block_size; }
    int64_t n_slots() const { return int64_t(n_blocks_) * layout_.block_size; }
    size_t total_bytes() const { return size_t(n_blocks_) * layout_.bytes_per_block(); }

    // Stores the K and V rows of n_tokens tokens of one layer. k and v are
    // [n_tokens][n_kv_heads * head_dim] floats (v unread, may be null, when layout().v_is_k); token i goes to slots[i]. A negative slot means
    // "padding, skip this token". Throws pagoda::Error for a bad layer or a slot >= n_slots(),
    // before anything is written. With `threads`, a prefill's tokens are stored on all of them (the
    // slots of one step are distinct, so the rows never overlap).
    void write(int32_t layer, const int64_t* slots, int64_t n_tokens, const float* k, const float* v,
               ThreadPool* threads = nullptr);

    // Asks for the lines a write() of these slots will store to: a hint that changes no value (bad
    // layers and slots are skipped; write() checks them). A decode step stores one row per KV head
    // at scattered slots, each line cold: requested before the step's QKV matmul, they arrive while
    // it streams its weights instead of stalling the stores after it. Small steps only (a
    // prefill's many rows are written in parallel and stream on their own).
    void prefetch_write(int32_t layer, const int64_t* slots, int64_t n_tokens) const;

    // Copies block src to block dst in every layer, K and V (executes a BlockManager copy-on-write).
    void copy_block(int32_t src, int32_t dst);

    // Block `block` of every layer, K then V per layer (layout().bytes_per_block() bytes), out of
    // and into the pool: one memcpy per layer and K/V, like copy_block. Throws on a bad id or size.
    void export_block(int32_t block, std::span<uint8_t> out) const;
    void import_block(int32_t block, std::span<const uint8_t> in);

    // Raw storage of one layer (for the attention kernel). Byte offset of (block, head, slot) is
    // block * layer_block_bytes + head * head_block_bytes + slot * row_bytes.
    const uint8_t* k_data(int32_t layer) const { return k_[size_t(layer)].data(); }
    // With layout().v_is_k the V rows are the K rows: v_data is k_data.
    const uint8_t* v_data(int32_t layer) const { return layout_.v_is_k ? k_data(layer) : v_[size_t(layer)].data(); }

    // Reads one stored row back as floats (for tests and debugging).
    void read_k(int32_t layer, int64_t slot, int32_t kv_head, float* out) const;
    void read_v(int32_t layer, int64_t slot, int32_t kv_head, float* out) const;

private:
    size_t row_offset(int64_t slot, int32_t kv_head) const;
    void check_layer(int32_t layer) const;
    void check_slot(int64_t slot) const;

    KvLayout layout_;
    int32_t n_blocks_ = 0;
    std::vector<AlignedBuffer<uint8_t>> k_, v_;
};

// Converts n floats into one stored row of the KV element type at dst (q8: quantised, with its
// scale; kv_row_bytes(dtype, n) bytes), and back.
void kv_store_row(KvDtype dtype, const float* src, void* dst, int64_t n);
void kv_load_row(KvDtype dtype, const void* src, float* dst, int64_t n);

}  // namespace pagoda::backend::cpu
