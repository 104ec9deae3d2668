#include "core/checksum.h"

#include <cstring>

namespace pagoda {
namespace {

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t avalanche(uint64_t x) {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

constexpr uint64_t kMulA = 0xa0761d6478bd642full;
constexpr uint64_t kMulB = 0xe7037ed1a0b428dbull;

inline uint64_t lane(uint64_t v, uint64_t word) { return rotl(v + word * kMulA, 29) * kMulB; }

inline uint64_t load64(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
}

}  // namespace

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t v0 = seed ^ 0x8ebc6af09c88c6e3ull, v1 = seed + 0x589965cc75374cc3ull, v2 = ~seed, v3 = seed * kMulB + 1;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v0 = lane(v0, load64(p + i));
        v1 = lane(v1, load64(p + i + 8));
        v2 = lane(v2, load64(p + i + 16));
        v3 = lane(v3, load64(p + i + 24));
    }
    uint64_t h = rotl(v0, 1) + rotl(v1, 7) + rotl(v2, 12) + rotl(v3, 18);
    for (; i + 8 <= n; i += 8) h = avalanche(h ^ load64(p + i)) * kMulA;
    uint64_t tail = 0;
    if (i < n) std::memcpy(&tail, p + i, n - i);
    h = avalanche(h ^ tail ^ (uint64_t(n) * kMulB));
    return h;
}


}  // namespace pagoda
