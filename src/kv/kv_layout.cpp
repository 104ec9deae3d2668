#include "kv/kv_layout.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace pagoda::kv {

const char* kv_dtype_name(KvDtype dtype) {
    switch (dtype) {
        case KvDtype::f32: return "f32";
        case KvDtype::f16: return "f16";
        case KvDtype::bf16: return "bf16";
        case KvDtype::q8: return "q8";
    }
    return "?";
}

KvDtype parse_kv_dtype(const char* name) {
    if (std::strcmp(name, "f32") == 0) return KvDtype::f32;
    if (std::strcmp(name, "f16") == 0) return KvDtype::f16;
    if (std::strcmp(name, "bf16") == 0) return KvDtype::bf16;
    if (std::strcmp(name, "q8") == 0) return KvDtype::q8;
    fail("unknown KV cache type '{}' (expected f32, f16, bf16 or q8)", name);
}

void KvLayout::validate() const {
    if (n_layers <= 0) fail("KV layout: n_layers must be positive, got {}", n_layers);
    if (n_kv_heads <= 0) fail("KV layout: n_kv_heads must be positive, got {}", n_kv_heads);
    if (head_dim <= 0 || head_dim > 4096) fail("KV layout: head_dim must be in 1..4096, got {}", head_dim);
    if (block_size < 1 || block_size > kMaxBlockSize || (block_size & (block_size - 1)) != 0)
        fail("KV layout: block size must be a power of two in 1..{}, got {}", kMaxBlockSize, block_size);
    if (dtype != KvDtype::f32 && dtype != KvDtype::f16 && dtype != KvDtype::bf16 &&
        dtype != KvDtype::q8)
        fail("KV layout: unknown element type {}", int(dtype));
    // Guard the size products below against overflow (absurd head counts from a bad model file).
    if (uint64_t(n_layers) * uint64_t(n_kv_heads) > (uint64_t(1) << 24))
        fail("KV layout: {} layers x {} KV heads is too large", n_layers, n_kv_heads);
}

int64_t blocks_for_budget(uint64_t bytes, const KvLayout& layout) {
    layout.validate();
    uint64_t per_block = layout.bytes_per_block();
    uint64_t n = bytes / per_block;
    return int64_t(std::min<uint64_t>(n, uint64_t(std::numeric_limits<int32_t>::max())));
}

}  // namespace pagoda::kv
