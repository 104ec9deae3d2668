// AVX-512 (F/BW/VL) path of the paged attention kernel: attention_simd.h over simd::Avx512 (masked
// loads for any head_dim, 16 keys' scores at a time summed by Avx512::lanes16, P.V four 16-float
// chunks per head at a time), plus two query heads' scores sharing each converted K row (head_dim
// 64, 96 or 128: scores_pair, scores_pair_rows), each score the bits the one-head scores give.
#include <immintrin.h>

// GCC 12's AVX-512 headers implement several unmasked intrinsics on top of _mm512_undefined_*(),
// which trips a false -Wmaybe-uninitialized (or, inlined deeper, -Wuninitialized) when inlined
// (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/attention/attention_simd.h"

namespace pagoda::backend::cpu::attention_detail {
namespace {

struct AttentionAvx512 : simd::Avx512 {
    static constexpr int kAccChunks = 4, kConvertChunks = 4;
    static V row_scales(const uint8_t* const* r, int d) {
        alignas(64) float rs[16];
        for (int k = 0; k < 16; ++k) rs[k] = q8_scale(r[k], d);
        return _mm512_load_ps(rs);
    }
    // Lane k: the sum of a[k]'s lanes, paired the same way whichever key a vector holds (lanes 8
    // apart, then 4, 2, 1).
    static V sum_each(const V (&a)[16]) { return lanes16<simd::AddPs>(a); }
};
using Base = SimdOps<AttentionAvx512>;

// The scores of 8 keys from their lane vectors a[k] (what SimdOps::scores_block holds before
// sum_each), key k in lane k of the result: the lanes of each are summed in sum_each's pairs (8
// apart, then 4, 2, 1), so each score is the same value, bit for bit; only the arrangement differs.
[[gnu::always_inline]] inline __m256 reduce8(const __m512 (&a)[8]) {
    __m512 b[4], c[2];
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {  // 256-bit halves: [a_k | a_k+4], lanes 8 apart summed
        const __m512 x = _mm512_shuffle_f32x4(a[k], a[k + 4], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 y = _mm512_shuffle_f32x4(a[k], a[k + 4], _MM_SHUFFLE(3, 2, 3, 2));
        b[k] = _mm512_add_ps(x, y);
    }
    #pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {  // 128-bit quarters: [a_k, a_k+4, a_k+2, a_k+6], lanes 4 apart summed
        const __m512 x = _mm512_shuffle_f32x4(b[k], b[k + 2], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 y = _mm512_shuffle_f32x4(b[k], b[k + 2], _MM_SHUFFLE(3, 1, 3, 1));
        c[k] = _mm512_add_ps(x, y);
    }
    // lanes 2 apart: quarter Q holds [c0's two, c1's two]; then lanes 1 apart: quarter Q lanes 0, 1
    // hold the keys of c0 and c1 at quarter Q (0, 1 | 4, 5 | 2, 3 | 6, 7).
    const __m512d x = _mm512_unpacklo_pd(_mm512_castps_pd(c[0]), _mm512_castps_pd(c[1]));
    const __m512d y = _mm512_unpackhi_pd(_mm512_castps_pd(c[0]), _mm512_castps_pd(c[1]));
    const __m512 e = _mm512_add_ps(_mm512_castpd_ps(x), _mm512_castpd_ps(y));
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e, e, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(e, e, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 1, 8, 9, 4, 5, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, f));
}

// Two query heads' scores of 8 keys: chunk(r, v) gives key r's v-th 16-float chunk, loaded once for
// both heads, whose queries stay in registers; per key the arithmetic is scores16's. With row
// scales rs (q8 codes), each score is multiplied by its row's scale before the softmax scale, as
// Avx512Ops::scores<q8> does.
template <int NV, class Chunk>
[[gnu::always_inline]] inline void scores_pair8(const __m512 (&qa)[NV], const __m512 (&qb)[NV], Chunk chunk, const float* rs,
                                              __m256 sv, float* s0, float* s1) {
    __m512 a[8], b[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) a[r] = b[r] = _mm512_setzero_ps();
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
        #pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const __m512 kv = chunk(r, v);
            a[r] = _mm512_fmadd_ps(qa[v], kv, a[r]);
            b[r] = _mm512_fmadd_ps(qb[v], kv, b[r]);
        }
    __m256 ra = reduce8(a), rb = reduce8(b);
    if (rs) {
        const __m256 r = _mm256_loadu_ps(rs);
        ra = _mm256_mul_ps(ra, r);
        rb = _mm256_mul_ps(rb, r);
    }
    _mm256_storeu_ps(s0, _mm256_mul_ps(ra, sv));
    _mm256_storeu_ps(s1, _mm256_mul_ps(rb, sv));
}

// scores_pair8 for keys j0 .. j1 - 1 (j1 - j0 a multiple of 8); keys(j) gives the chunk reader of
// the 8 keys from j.
template <int NV, class Keys>
void scores_pair_range(const float* q0, const float* q1, int j0, int j1, const float* rs, float scale, float* s0, float* s1,
                       Keys keys) {
    __m512 qa[NV], qb[NV];
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
        qa[v] = _mm512_load_ps(q0 + 16 * v);
        qb[v] = _mm512_load_ps(q1 + 16 * v);
    }
    const __m256 sv = _mm256_set1_ps(scale);
    for (int j = j0; j < j1; j += 8) scores_pair8<NV>(qa, qb, keys(j), rs ? rs + j : nullptr, sv, s0 + j, s1 + j);
}

// From a widened tile (rows 16 NV floats apart) or from cache rows read in place (f16 or bf16).
template <int NV>
void scores_pair_tile(const float* q0, const float* q1, const float* tile, const float* rs, int j0, int j1, float scale,
                      float* s0, float* s1) {
    scores_pair_range<NV>(q0, q1, j0, j1, rs, scale, s0, s1, [tile](int j) {
        const float* k = tile + size_t(j) * 16 * NV;
        return [k](int r, int v) { return _mm512_load_ps(k + r * 16 * NV + 16 * v); };
    });
}
template <kv::KvDtype DT, int NV>
void scores_pair_rows_of(const float* q0, const float* q1, const uint8_t* const* rows, int n, float scale, float* s0,
                         float* s1) {
    scores_pair_range<NV>(q0, q1, 0, (n + 7) / 8 * 8, nullptr, scale, s0, s1, [rows](int j) {
        const uint8_t* const* r8 = rows + j;
        return [r8](int r, int v) { return Base::load_row<DT>(r8[r], 16 * v); };
    });
}

struct Avx512Ops : Base {
    static bool scores_pairs(int d) { return d == 64 || d == 96 || d == 128; }  // attention.cpp's pair_scores too
    // Two query heads' scores of f16 or bf16 rows read in place: s[j] for j < n rounded up to 8
    // (rows and s readable that far), each the bits scores<DT> gives.
    template <kv::KvDtype DT>
    static void scores_pair_rows(const float* q0, const float* q1, const uint8_t* const* rows, int n, int d, float scale,
                                 float* s0, float* s1) {
        if (d == 64) scores_pair_rows_of<DT, 4>(q0, q1, rows, n, scale, s0, s1);
        else if (d == 96) scores_pair_rows_of<DT, 6>(q0, q1, rows, n, scale, s0, s1);
        else scores_pair_rows_of<DT, 8>(q0, q1, rows, n, scale, s0, s1);
    }
    static void scores_pair(const float* q0, const float* q1, const float* tile, const float* rs, int j0, int j1, int d,
                            float scale, float* s0, float* s1) {
        if (d == 64) scores_pair_tile<4>(q0, q1, tile, rs, j0, j1, scale, s0, s1);
        else if (d == 96) scores_pair_tile<6>(q0, q1, tile, rs, j0, j1, scale, s0, s1);
        else scores_pair_tile<8>(q0, q1, tile, rs, j0, j1, scale, s0, s1);
    }
};

}  // namespace

void attend_avx512(const Task& t) { walk<Avx512Ops>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
