// AVX2 kernel of the int8 method: one 32-value block per step; bytes widened to 16 bits and multiplied
// with vpmaddwd (exact for weight bytes up to 255, which vpmaddubsw's int16 saturation is not), one
// int32 vector per 16-value half, scaled per half in f32. 2 rows x 2 tokens per step.
#include <immintrin.h>

#include "kernels/cpu/int8_gemm.h"

namespace pagoda::kernels::detail {
namespace {

inline float hsum256(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

struct Avx2Kernel {
    static constexpr int R = 2, T = 2;

    template <int TT>
    static void compute(const uint8_t* const* u, const float* const* sw, const float* const* mh,
                        const QuantizedActivations& a, int64_t t0, float* out) {
        const int64_t nb = a.n_blocks, K = a.cols;
        __m256 acc[TT][R];
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            __m256i ul[R], uh[R];
            __m256 s0[R], s1[R];
            for (int r = 0; r < R; ++r) {
                ul[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u[r] + b * 32)));
                uh[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u[r] + b * 32 + 16)));
                s0[r] = _mm256_set1_ps(sw[r][2 * b]);
                s1[r] = _mm256_set1_ps(sw[r][2 * b + 1]);
            }
            for (int t = 0; t < TT; ++t) {
                const int8_t* q = a.q.data() + (t0 + t) * K + b * 32;
                __m256i ql = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
                __m256i qh = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
                __m256 dv = _mm256_set1_ps(a.d[size_t((t0 + t) * nb + b)]);
                for (int r = 0; r < R; ++r) {
                    __m256 p0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(ul[r], ql));
                    __m256 p1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(uh[r], qh));
                    __m256 f = _mm256_fmadd_ps(p1, s1[r], _mm256_mul_ps(p0, s0[r]));
                    acc[t][r] = _mm256_fmadd_ps(f, dv, acc[t][r]);
                }
            }
        }
        const int64_t nh = 2 * nb;
        __m256 macc[TT][R];
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) macc[t][r] = _mm256_setzero_ps();
        for (int64_t h = 0; h < nh; h += 8) {
            const int64_t cnt = std::min<int64_t>(8, nh - h);
            const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(cnt)), lanes);
            __m256 mv[R];
            for (int r = 0; r < R; ++r) mv[r] = _mm256_maskload_ps(mh[r] + h, m);
            for (int t = 0; t < TT; ++t) {
                __m256 sv = _mm256_maskload_ps(a.s.data() + (t0 + t) * nh + h, m);
                for (int r = 0; r < R; ++r) macc[t][r] = _mm256_fmadd_ps(mv[r], sv, macc[t][r]);
            }
        }
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) out[t * R + r] = hsum256(acc[t][r]) + hsum256(macc[t][r]);
    }
};

}  // namespace

void matmul_int8_avx2(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                      const GemmTiles& tiles) {
    int8_matmul<Avx2Kernel>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::kernels::detail
