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
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3),
            a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7),
            a8 = _mm512_set1_epi32(8), a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
    // The instructions written out with their accumulators tied, in scalars rather than an array (an
    // array under asm stays in memory): around _mm512_dpbusd_epi32 in this loop GCC 12 emitted two
    // register copies per vpdpbusd, and on Ice Lake server that loop measured half the rate of
    // vpdpbusd alone (2.2 against 5.5 a nanosecond on one core).
    for (int64_t it = 0; it < iterations; ++it)
        asm("vpdpbusd %12, %13, %0\n\tvpdpbusd %12, %13, %1\n\tvpdpbusd %12, %13, %2\n\tvpdpbusd %12, %13, %3\n\t"
            "vpdpbusd %12, %13, %4\n\tvpdpbusd %12, %13, %5\n\tvpdpbusd %12, %13, %6\n\tvpdpbusd %12, %13, %7\n\t"
            "vpdpbusd %12, %13, %8\n\tvpdpbusd %12, %13, %9\n\tvpdpbusd %12, %13, %10\n\tvpdpbusd %12, %13, %11"
            : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9),
              "+v"(a10), "+v"(a11)
            : "v"(b), "v"(a));
    const __m512i s = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                         _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))),
        _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
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
