// The AVX2 read loop of read_bandwidth.cpp (this file is compiled with -mavx2).
#include <cstddef>
#include <cstdint>
#include <immintrin.h>

namespace pagoda {

namespace {

// Requests the two cache lines `ahead` bytes past p. Inline asm: GCC may drop a prefetch whose
// result nothing reads; a prefetch never faults, so past the end of the memory is harmless.
inline void prefetch_two_lines(const uint8_t* p) {
    asm volatile("prefetcht0 %0\n\tprefetcht0 %1" : : "m"(*p), "m"(*(p + 64)));
}

template <int S, bool Prefetch>
uint64_t streams_sum(const uint8_t* data, size_t per, size_t ahead) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < per; i += 128) {
#pragma GCC unroll 8
        for (int s = 0; s < S; ++s) {
            const uint8_t* p = data + size_t(s) * per + i;
            if constexpr (Prefetch) prefetch_two_lines(p + ahead);
            a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
            c = _mm256_add_epi64(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64)));
            d = _mm256_add_epi64(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 96)));
        }
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    alignas(32) uint64_t out[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
    return out[0] + out[1] + out[2] + out[3];
}

}  // namespace

// The sum of the 64-bit words of `streams` runs of `per` bytes (a multiple of 128) laid end to end,
// read together: 128 bytes of each run in turn.
uint64_t read_streams_sum_avx2(const uint8_t* data, size_t per, int streams, bool prefetch, size_t ahead) {
    switch (streams * 2 + (prefetch ? 1 : 0)) {
        case 2: return streams_sum<1, false>(data, per, ahead);
        case 3: return streams_sum<1, true>(data, per, ahead);
        case 4: return streams_sum<2, false>(data, per, ahead);
        case 5: return streams_sum<2, true>(data, per, ahead);
        case 8: return streams_sum<4, false>(data, per, ahead);
        case 9: return streams_sum<4, true>(data, per, ahead);
        case 16: return streams_sum<8, false>(data, per, ahead);
        case 17: return streams_sum<8, true>(data, per, ahead);
        default: return 0;  // read_bandwidth.cpp only asks for 1, 2, 4 or 8 streams
    }
}

}  // namespace pagoda
