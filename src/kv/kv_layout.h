// The shape of the paged KV cache: how many layers / KV heads, the head size, the block size (tokens
// per block, a power of two 1..256) and the element type K and V are stored in. One block holds
// `block_size` token slots for every layer and KV head; a slot index is block_id * block_size + offset.
// blocks_for_budget() turns a memory budget in bytes into a block count for KvPool.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pagoda::kv {

enum class KvDtype { f32 = 0, f16 = 1, bf16 = 2 };

const char* kv_dtype_name(KvDtype dtype);
KvDtype parse_kv_dtype(const char* name);  // "f32" | "f16" | "bf16"; throws pagoda::Error otherwise
inline size_t kv_dtype_size(KvDtype dtype) { return dtype == KvDtype::f32 ? 4 : 2; }

constexpr int32_t kDefaultBlockSize = 16;
constexpr int32_t kMaxBlockSize = 256;

struct KvLayout {
    int32_t n_layers = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t block_size = kDefaultBlockSize;
    KvDtype dtype = KvDtype::f16;

    // Throws pagoda::Error naming the bad field (non-positive sizes, block size not a power of two
    // in 1..256).
    void validate() const;

    // Bytes of one token row of one head (head_dim elements).
    size_t row_bytes() const { return size_t(head_dim) * kv_dtype_size(dtype); }
    // Bytes of one (block, kv_head) tile: block_size rows, contiguous.
    size_t head_block_bytes() const { return row_bytes() * size_t(block_size); }
    // Bytes of one block of K (or of V) in one layer.
    size_t layer_block_bytes() const { return head_block_bytes() * size_t(n_kv_heads); }
    // Bytes one block costs in total: K and V, all layers.
    size_t bytes_per_block() const { return 2 * size_t(n_layers) * layer_block_bytes(); }
};

// How many whole blocks fit in `bytes` (K and V of all layers), capped at the largest block id
// an int32 block table can hold. Validates the layout; returns 0 when not even one block fits.
int64_t blocks_for_budget(uint64_t bytes, const KvLayout& layout);

}  // namespace pagoda::kv
