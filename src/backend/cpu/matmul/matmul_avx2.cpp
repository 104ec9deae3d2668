// AVX2 + FMA + F16C f32 path of matmul: 8 lanes (simd/avx2.h), 4 rows x 2 tokens of ymm accumulators
// (16 registers).
#include "backend/cpu/matmul/float_gemm.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx2Gemm : simd::Avx2 {
    static constexpr int R = 4, T = 2;
    // hsum of the 4 rows' vectors at once with the adds hsum does (q_j = v[j] + v[j+4], then
    // q0+q2 / q1+q3, then their sum); only the shuffles are shared.
    static void sum_rows(const V* v, float* out) {
        // 128-bit chunk 0 / 1: rows 0 / 1 (and 2 / 3), each q0..q3.
        const __m256 q01 = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x20), _mm256_permute2f128_ps(v[0], v[1], 0x31));
        const __m256 q23 = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[3], 0x20), _mm256_permute2f128_ps(v[2], v[3], 0x31));
        // Per chunk [q0, q1 of row a, q0, q1 of row b] + [q2, q3, q2, q3]: chunk 0 rows 0 and 2, chunk 1 rows 1 and 3.
        const __m256 lo = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(q01), _mm256_castps_pd(q23)));
        const __m256 hi = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(q01), _mm256_castps_pd(q23)));
        const __m256 p = _mm256_add_ps(lo, hi);
        const __m256 s = _mm256_hadd_ps(p, p);  // per chunk: row a's (q0+q2)+(q1+q3), row b's, repeated
        const __m128 r02 = _mm256_castps256_ps128(s), r13 = _mm256_extractf128_ps(s, 1);
        _mm_storeu_ps(out, _mm_unpacklo_ps(r02, r13));
    }
};

}  // namespace

void matmul_float_avx2(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                       const GemmTiles& tiles) {
    float_matmul<Avx2Gemm>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
