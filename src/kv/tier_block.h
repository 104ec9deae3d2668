// What the prefix-cache tier (prefix_tier.h) stores: one full KV block evicted from the pool —
// its chain hash, the inputs of that hash (parent hash, tokens, extra key) so a hit can be checked
// exactly as the pool checks its own, and the block's K/V bytes as the backend exported them
// (opaque here: kv_bytes_per_block of any element type). TierIdentity says which model and KV
// layout the bytes belong to; a store made for one identity never serves another.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "kv/kv_layout.h"

namespace pagoda::kv {

struct TierIdentity {
    uint64_t model_key = 0;      // the weights (StepModelInfo::model_key: a digest of the GGUF file)
    std::string backend;         // whose arithmetic produced the bytes ("cpu", "reference")
    KvLayout layout;             // layers, KV heads, head dim, block size, element type
    uint64_t bytes_per_block = 0;  // the payload length

    // A stable 64-bit digest of every field (the same in every build and process): file names and
    // the quick match of a file header.
    uint64_t digest() const;
    friend bool operator==(const TierIdentity& a, const TierIdentity& b) {
        return a.model_key == b.model_key && a.backend == b.backend && a.layout.n_layers == b.layout.n_layers &&
               a.layout.n_kv_heads == b.layout.n_kv_heads && a.layout.head_dim == b.layout.head_dim &&
               a.layout.block_size == b.layout.block_size && a.layout.dtype == b.layout.dtype &&
               a.bytes_per_block == b.bytes_per_block;
    }
};

struct TierBlock {
    uint64_t hash = 0;         // hash_block(parent_hash, tokens, extra_key)
    uint64_t parent_hash = 0;
    uint64_t extra_key = 0;
    std::vector<int32_t> tokens;   // block_size of them
    std::vector<uint8_t> payload;  // K and V of every layer (bytes_per_block)

    // Bytes this entry costs a store's budget (payload, tokens and bookkeeping).
    size_t footprint() const { return payload.size() + tokens.size() * sizeof(int32_t) + 96; }
    // Whether the stored hash is the hash of the stored inputs.
    bool hash_consistent() const;
};

using pagoda::checksum64;

}  // namespace pagoda::kv
