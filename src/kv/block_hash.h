// Content hash of a full KV block for automatic prefix caching: a 64-bit value determined by the
// parent block's hash (so a hash names the whole prefix up to and including this block), the
// block's token ids and an extra key (model / adapter id, so different weights never share KV).
//
// Why this construction: it is a sponge over murmur3's 64-bit finaliser, which is a bijection, so
// for a fixed state every absorbed word leads to a distinct next state (no collisions within a
// step); collisions between different whole inputs behave like a random 64-bit function. The block
// manager additionally compares the stored tokens, parent hash and extra key on every hit, so a
// collision could only matter if two different prefixes collide at an earlier level and are
// both looked up in the window where that matters — odds around 2^-64 per lookup.
#pragma once
#include <cstdint>

namespace pagoda::kv {

// The parent hash of a sequence's first block.
constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ull;

uint64_t hash_block(uint64_t parent_hash, const int32_t* tokens, int32_t n_tokens, uint64_t extra_key);

}  // namespace pagoda::kv
