#include "kv/block_hash.h"

namespace pagoda::kv {
namespace {

// murmur3 fmix64: invertible xorshift-multiply mixing with full avalanche.
inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

inline uint64_t absorb(uint64_t state, uint64_t word) { return fmix64(state ^ word) + 0x9e3779b97f4a7c15ull; }

}  // namespace

uint64_t hash_block(uint64_t parent_hash, const int32_t* tokens, int32_t n_tokens, uint64_t extra_key) {
    uint64_t h = absorb(0x243f6a8885a308d3ull, parent_hash);
    h = absorb(h, extra_key);
    h = absorb(h, uint64_t(uint32_t(n_tokens)));
    int32_t i = 0;
    for (; i + 1 < n_tokens; i += 2)
        h = absorb(h, uint64_t(uint32_t(tokens[i])) | (uint64_t(uint32_t(tokens[i + 1])) << 32));
    if (i < n_tokens) h = absorb(h, uint64_t(uint32_t(tokens[i])) | (uint64_t(0xffffffffu) << 32));
    return fmix64(h ^ 0x13198a2e03707344ull);
}

}  // namespace pagoda::kv
