// AVX2 helpers of machine_limits.cpp (this file is compiled with -mavx2 -mfma).
#include <cstddef>
#include <cstdint>
#include <immintrin.h>

namespace pagoda {

double fma_chain_avx2(int64_t iterations) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
    const __m256 m = _mm256_set1_ps(0.999999f), k = _mm256_set1_ps(1e-7f);
    for (int64_t it = 0; it < iterations; ++it)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, k);
    __m256 s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return double(out[0]);
}

// The AVX2 int8 dot of the panel kernel (matmul_packed_avx2.cpp): per 4 code vectors, 4 vpmaddubsw
// (32 unsigned x signed byte products each) summed as int16 pairs and widened by one vpmaddwd. Two
// independent sums of 4 an iteration (8 vpmaddubsw), so that the 8 code vectors, 2 accumulators and
// 2 constants fit AVX2's 16 registers (12 code vectors spilled and read ~25 % below the kernel on
// Zen 1); the empty asm keeps the compiler from hoisting the loop-invariant products out of the
// loop (it emits no instruction).
int64_t maddubs_chain_avx2(int64_t iterations) {
    __m256i acc[2], u[8];
    for (int i = 0; i < 2; ++i) acc[i] = _mm256_set1_epi32(i);
    for (int i = 0; i < 8; ++i) u[i] = _mm256_set1_epi8(char(3 + i));
    const __m256i q = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) asm volatile("" : "+x"(u[i]));
#pragma GCC unroll 2
        for (int c = 0; c < 2; ++c) {
            const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(u[4 * c], q), _mm256_maddubs_epi16(u[4 * c + 1], q));
            const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(u[4 * c + 2], q), _mm256_maddubs_epi16(u[4 * c + 3], q));
            acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones));
        }
    }
    const __m256i s = _mm256_add_epi32(acc[0], acc[1]);
    alignas(32) int32_t out[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
    return int64_t(out[0]) + out[7];
}

}  // namespace pagoda
