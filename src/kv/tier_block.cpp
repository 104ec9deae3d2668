#include "kv/tier_block.h"

#include <cstring>

#include "core/checksum.h"
#include "kv/block_hash.h"

namespace pagoda::kv {
uint64_t TierIdentity::digest() const {
    struct Fields {
        uint64_t model_key, bytes;
        int32_t layers, heads, head_dim, block_size, dtype, pad;
    } f{model_key, bytes_per_block, layout.n_layers, layout.n_kv_heads, layout.head_dim, layout.block_size,
        int32_t(layout.dtype), 0};
    return checksum64(backend.data(), backend.size(), checksum64(&f, sizeof f, 0x70616764614b5631ull));
}

bool TierBlock::hash_consistent() const {
    return !tokens.empty() && hash_block(parent_hash, tokens.data(), int32_t(tokens.size()), extra_key) == hash;
}

}  // namespace pagoda::kv
