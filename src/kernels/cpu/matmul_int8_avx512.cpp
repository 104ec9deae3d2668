// AVX-512 VNNI kernel of the int8 method: two 32-value blocks per zmm, vpdpbusd (unsigned weight bytes
// x signed activation bytes, exact int32 sums of 4 products), scaled per 16-value half in f32.
// 4 rows x 4 tokens per step. Lane structure per output: 16 lanes over block pairs, masked final
// block when the block count is odd; a second 16-lane vector over the per-half offset terms.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/int8_gemm.h"

namespace pagoda::kernels::detail {
namespace {

inline float hsum512(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

struct VnniKernel {
    static constexpr int R = 4, T = 4;

    template <int TT>
    static void compute(const uint8_t* const* u, const float* const* sw, const float* const* mh,
                        const QuantizedActivations& a, int64_t t0, float* out) {
        const int64_t nb = a.n_blocks, K = a.cols;
        // Lane i of a block pair belongs to half i/4: lanes 0-3 block b half 0, 4-7 half 1, 8-15 block b+1.
        const __m512i half_idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        const __m512i block_idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i zero = _mm512_setzero_si512();
        __m512 acc[TT][R];
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
        int64_t b = 0;
        auto step = [&](__mmask64 bytes, bool pair) {
            __m512i uv[R];
            __m512 sv[R];
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                uv[r] = _mm512_maskz_loadu_epi8(bytes, u[r] + b * 32);
                __m128 s4 = pair ? _mm_loadu_ps(sw[r] + 2 * b) : _mm_setr_ps(sw[r][2 * b], sw[r][2 * b + 1], 0.f, 0.f);
                sv[r] = _mm512_permutexvar_ps(half_idx, _mm512_zextps128_ps512(s4));
            }
#pragma GCC unroll 4
            for (int t = 0; t < TT; ++t) {
                const int8_t* q = a.q.data() + (t0 + t) * K + b * 32;
                const float* d = a.d.data() + (t0 + t) * nb + b;
                __m512i qv = _mm512_maskz_loadu_epi8(bytes, q);
                __m128 d2 = pair ? _mm_setr_ps(d[0], d[1], 0.f, 0.f) : _mm_load_ss(d);
                __m512 dv = _mm512_permutexvar_ps(block_idx, _mm512_zextps128_ps512(d2));
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) {
                    __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, uv[r], qv));
                    acc[t][r] = _mm512_fmadd_ps(f, _mm512_mul_ps(sv[r], dv), acc[t][r]);
                }
            }
        };
        for (; b + 2 <= nb; b += 2) step(~__mmask64(0), true);
        if (b < nb) step(__mmask64(0xffffffffull), false);

        const int64_t nh = 2 * nb;
        __m512 macc[TT][R];
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) macc[t][r] = _mm512_setzero_ps();
        for (int64_t h = 0; h < nh; h += 16) {
            const __mmask16 m = nh - h >= 16 ? __mmask16(0xffff) : __mmask16((1u << (nh - h)) - 1);
            __m512 mv[R];
            for (int r = 0; r < R; ++r) mv[r] = _mm512_maskz_loadu_ps(m, mh[r] + h);
            for (int t = 0; t < TT; ++t) {
                __m512 sv = _mm512_maskz_loadu_ps(m, a.s.data() + (t0 + t) * nh + h);
                for (int r = 0; r < R; ++r) macc[t][r] = _mm512_fmadd_ps(mv[r], sv, macc[t][r]);
            }
        }
        for (int t = 0; t < TT; ++t)
            for (int r = 0; r < R; ++r) out[t * R + r] = hsum512(acc[t][r]) + hsum512(macc[t][r]);
    }
};

}  // namespace

void matmul_int8_avx512(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                        const GemmTiles& tiles) {
    int8_matmul<VnniKernel>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::kernels::detail
