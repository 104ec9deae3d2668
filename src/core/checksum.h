// A 64-bit checksum of n bytes: four independent multiply-rotate lanes over 8-byte words, then a
// full avalanche — several GB/s, and any flipped bit or changed length changes it. `seed` chains
// several buffers into one value. Stable across builds and processes (files and identities use it);
// not cryptographic.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pagoda {

uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

}  // namespace pagoda
