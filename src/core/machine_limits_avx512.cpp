// AVX-512 helpers of machine_limits.cpp (this file is compiled with AVX-512 F/BW/VL/VNNI/BF16 flags).
#include <cstdint>
// GCC 12's AVX-512 reduction intrinsics trip a false -Wuninitialized (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace pagoda {

double fma_chain_avx512(int64_t iterations) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999999f), k = _mm512_set1_ps(1e-7f);
    for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, k);
    __m512 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
    return double(_mm512_reduce_add_ps(s));
}

int64_t vnni_chain_avx512(int64_t iterations) {
    __m512i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
    return _mm512_reduce_add_epi32(s);
}

double bf16_dot_chain_avx512(int64_t iterations) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
    // bf16 pairs (1.0, 1e-3-ish): the sums stay finite for any iteration count that fits a benchmark.
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3a833f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
    return double(_mm512_reduce_add_ps(s));
}

}  // namespace pagoda
