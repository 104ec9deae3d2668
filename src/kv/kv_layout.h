// The shape of the paged KV cache: how many layers / KV heads, the head size, the block size (tokens
// per block, a power of two 1..256) and the element type K and V are stored in. One block holds
// `block_size` token slots for every layer and KV head; a slot index is block_id * block_size + offset.
// blocks_for_budget() turns a memory budget in bytes into a block count for KvPool.
//
// v_is_k: the cache stores K only and attention reads each K row as its V row (V = K, so the
// attention output has head_dim values a head). DeepSeek's absorbed MLA keeps one latent row
// [k_pe, c] a token and layer this way: its V (c) is part of its K. A block then holds half the bytes.
//
// q8 rows: each head_dim row of K (and of V) of one token is int8 with its own fp32 scale
// (symmetric, scale = max|x| / 127, round to nearest). The scale lives inside the row, after the
// int8 values padded to 4 bytes: row = [int8 x head_dim][pad to 4][fp32 scale]. A row therefore
// carries everything needed to read it, so the size accounting below, copy-on-write (whole
// blocks) and the attention kernel's per-row pointers need nothing beyond row_bytes().
#pragma once
#include <cstddef>
#include <cstdint>

namespace pagoda::kv {

enum class KvDtype { f32 = 0, f16 = 1, bf16 = 2, q8 = 3 };

const char* kv_dtype_name(KvDtype dtype);
KvDtype parse_kv_dtype(const char* name);  // "f32" | "f16" | "bf16" | "q8"; throws pagoda::Error otherwise
// Bytes of one stored element, not counting q8's per-row scale (row_bytes() counts it).
inline size_t kv_dtype_size(KvDtype dtype) { return dtype == KvDtype::f32 ? 4 : dtype == KvDtype::q8 ? 1 : 2; }
// Byte offset of a q8 row's fp32 scale from the row's start: the int8 values padded to 4 bytes.
inline size_t q8_scale_offset(int32_t head_dim) { return (size_t(head_dim) + 3) / 4 * 4; }
// Bytes of one stored row of head_dim elements (q8: int8 values, padding, fp32 scale).
inline size_t kv_row_bytes(KvDtype dtype, int32_t head_dim) {
    return dtype == KvDtype::q8 ? q8_scale_offset(head_dim) + 4 : size_t(head_dim) * kv_dtype_size(dtype);
}

constexpr int32_t kDefaultBlockSize = 16;
constexpr int32_t kMaxBlockSize = 256;

struct KvLayout {
    int32_t n_layers = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t block_size = kDefaultBlockSize;
    KvDtype dtype = KvDtype::f16;
    bool v_is_k = false;  // no V storage: V rows are the K rows (see above)

    // Throws pagoda::Error naming the bad field (non-positive sizes, block size not a power of two
    // in 1..256).
    void validate() const;

    // Bytes of one token row of one head (head_dim elements; q8: with its scale).
    size_t row_bytes() const { return kv_row_bytes(dtype, head_dim); }
    // Bytes of one (block, kv_head) tile: block_size rows, contiguous.
    size_t head_block_bytes() const { return row_bytes() * size_t(block_size); }
    // Bytes of one block of K (or of V) in one layer.
    size_t layer_block_bytes() const { return head_block_bytes() * size_t(n_kv_heads); }
    // Bytes one block costs in total: K and V (K only when v_is_k), all layers.
    size_t bytes_per_block() const { return (v_is_k ? 1 : 2) * size_t(n_layers) * layer_block_bytes(); }
    // Bytes one token costs in one layer: K and V rows of every KV head (K only when v_is_k).
    size_t bytes_per_token_layer() const { return (v_is_k ? 1 : 2) * size_t(n_kv_heads) * row_bytes(); }
};

// How many whole blocks fit in `bytes` (K and V of all layers), capped at the largest block id
// an int32 block table can hold. Validates the layout; returns 0 when not even one block fits.
int64_t blocks_for_budget(uint64_t bytes, const KvLayout& layout);

}  // namespace pagoda::kv
