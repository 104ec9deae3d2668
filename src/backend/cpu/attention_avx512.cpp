// AVX-512 (F/BW/VL) path of the paged attention kernel: K/V tiles widened to f32 with masked loads
// (any head_dim), scores 16 keys at a time (one FMA chain per key, a shuffle tree to sum the lanes of
// all 16 at once), P.V with up to 4 heads sharing each V row, a vectorised exp for the softmax tile.
// q8 rows are widened in registers (masked byte load, sign-extend, convert) and scaled per row: the
// 16 scores by their rows' scales, each V row's weight p by its scale.
#include <immintrin.h>

#include <algorithm>
#include <limits>

// GCC 12's AVX-512 headers implement several unmasked intrinsics on top of _mm512_undefined_*(),
// which trips a false -Wmaybe-uninitialized (or, inlined deeper, -Wuninitialized) when inlined
// (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "backend/cpu/attention_walk.h"

namespace pagoda::kernels::attention_detail {
namespace {

inline __mmask16 tail_mask(int n) { return __mmask16((1u << n) - 1u); }

// Loads n <= 16 elements (the rest zero) from element index i of a row, widened to f32.
template <kv::KvDtype DT>
inline __m512 load16(const uint8_t* row, int i, __mmask16 m) {
    if constexpr (DT == kv::KvDtype::f32) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
    } else if constexpr (DT == kv::KvDtype::q8) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, row + i)));
    } else if constexpr (DT == kv::KvDtype::f16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    } else {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
}

// A q8 row's scale, after its d codes padded to 4 bytes: kv::q8_scale_offset, restated here because
// a shared inline function must not be compiled with this file's ISA flags.
inline float q8_scale(const uint8_t* row, int d) {
    float f;
    __builtin_memcpy(&f, row + (size_t(d) + 3) / 4 * 4, 4);
    return f;
}

// exp(x) for x <= 0; same construction and accuracy as the AVX2 path (see attention_avx2.cpp).
inline __m512 exp_nonpositive(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    __mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(e));
}

// Sums each of 16 vectors across its lanes: lane j of the result is the sum of a[j]'s lanes, always
// paired the same way (lanes 8 apart, then 4, 2, 1), whichever key a vector holds.
inline __m512 reduce16(const __m512* a) {
    __m512 b[8], c[4], e[2];
    #pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) {  // lanes 8 apart; 256-bit halves: [a_k | a_k+8]
        __m512 lo = _mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(1, 0, 1, 0));
        __m512 hi = _mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(3, 2, 3, 2));
        b[k] = _mm512_add_ps(lo, hi);
    }
    #pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {  // lanes 4 apart; 128-bit quarters: [a_k, a_k+8, a_k+4, a_k+12]
        __m512 x = _mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(2, 0, 2, 0));
        __m512 y = _mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(3, 1, 3, 1));
        c[k] = _mm512_add_ps(x, y);
    }
    #pragma GCC unroll 16
    for (int k = 0; k < 2; ++k) {  // lanes 2 apart
        __m512d x = _mm512_unpacklo_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]));
        __m512d y = _mm512_unpackhi_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]));
        e[k] = _mm512_add_ps(_mm512_castpd_ps(x), _mm512_castpd_ps(y));
    }
    // lanes 1 apart; lane 4L + {0,1,2,3} of the sum holds vector [0,2,1,3][.] + {0,8,4,12}[L]
    __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    return _mm512_permutexvar_ps(order, f);
}

// Mask of the elements of 16-float chunk v that lie inside a row of d.
inline __mmask16 chunk_mask(int v, int d) {
    const int left = d - 16 * v;
    return left >= 16 ? __mmask16(0xffff) : tail_mask(left);
}

// Scores of 16 key rows: one FMA chain per key over the row's 16-element chunks in order (lanes
// past d read as zero), then reduce16. FULL: d is NV whole chunks.
template <kv::KvDtype DT, int NV, bool FULL>
inline __m512 scores16(const float* q, const uint8_t* const* rows, int nv, int d) {
    if constexpr (NV > 0) nv = NV;
    __m512 a[16];
    #pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) a[r] = _mm512_setzero_ps();
    #pragma GCC unroll 16
    for (int v = 0; v < nv; ++v) {
        const __m512 qv = _mm512_load_ps(q + 16 * v);
        const __mmask16 m = FULL ? __mmask16(0xffff) : chunk_mask(v, d);
        #pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) a[r] = _mm512_fmadd_ps(qv, load16<DT>(rows[r], 16 * v, m), a[r]);
    }
    return reduce16(a);
}

// acc[h][c] += p[h][j] * v[j][c] for j in order, for H heads and CW 16-float chunks from chunk c0.
template <kv::KvDtype DT, int H, int CW>
inline void accumulate_block(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d,
                             int c0) {
    __m512 a[H][CW];
    __mmask16 m[CW];
    #pragma GCC unroll 16
    for (int c = 0; c < CW; ++c) m[c] = chunk_mask(c0 + c, d);
    #pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
        #pragma GCC unroll 16
        for (int c = 0; c < CW; ++c) a[h][c] = _mm512_load_ps(acc[h] + 16 * (c0 + c));
    for (int j = 0; j < n; ++j) {
        __m512 vv[CW];
        #pragma GCC unroll 16
        for (int c = 0; c < CW; ++c) vv[c] = load16<DT>(rows[j], 16 * (c0 + c), m[c]);
        const float rs = DT == kv::KvDtype::q8 ? q8_scale(rows[j], d) : 1.0f;
        #pragma GCC unroll 16
        for (int h = 0; h < H; ++h) {
            const __m512 pv = _mm512_set1_ps(DT == kv::KvDtype::q8 ? p[h][j] * rs : p[h][j]);
            #pragma GCC unroll 16
            for (int c = 0; c < CW; ++c) a[h][c] = _mm512_fmadd_ps(pv, vv[c], a[h][c]);
        }
    }
    #pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
        #pragma GCC unroll 16
        for (int c = 0; c < CW; ++c) _mm512_store_ps(acc[h] + 16 * (c0 + c), a[h][c]);
}

template <kv::KvDtype DT, int H>
inline void accumulate_heads(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d) {
    const int nv = (d + 15) / 16;
    int c0 = 0;
    #pragma GCC unroll 16
    for (; c0 + 4 <= nv; c0 += 4) accumulate_block<DT, H, 4>(acc, p, rows, n, d, c0);
    switch (nv - c0) {
        case 3: accumulate_block<DT, H, 3>(acc, p, rows, n, d, c0); break;
        case 2: accumulate_block<DT, H, 2>(acc, p, rows, n, d, c0); break;
        case 1: accumulate_block<DT, H, 1>(acc, p, rows, n, d, c0); break;
        default: break;
    }
}

// Transposes 16 vectors in place: r[c] lane k becomes (the old) r[k] lane c.
inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16], u[16];
    #pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3]
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    #pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {  // per 128-bit lane L: u[4i + e] = rows 4i..4i+3 at column 4L + e
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
    }
    #pragma GCC unroll 16
    for (int e = 0; e < 4; ++e) {  // a 4 x 4 transpose of 128-bit quarters among u[e], u[4+e], u[8+e], u[12+e]
        const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], _MM_SHUFFLE(3, 2, 3, 2));
        r[e] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + e] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + e] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + e] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

// Scores from a transposed K tile (kt[c][key], attention_walk.h): what scores16 computes for each
// key, with the keys in the lanes. scores16 gives key k lane l's FMA chain over the chunks
// (P_l = q[l] k[l] + q[16 + l] k[16 + l] + ..., from zero, in chunk order) and then sums the 16
// lanes pairwise: lanes 8 apart, then 4, 2, 1. Here each P_l is a vector over 16 keys and the same
// pairs are added vertically, so every score is the same value, bit for bit, without a shuffle.
// P_l + P_{l+8} for KG groups of 16 keys (kt at the first group's column).
template <int NV, int KG>
[[gnu::always_inline]] inline void lane_pair(const float* q, const float* kt, int nv, int l, __m512 (&b)[KG]) {
    if constexpr (NV > 0) nv = NV;
    __m512 p[KG], r[KG];
    #pragma GCC unroll 4
    for (int g = 0; g < KG; ++g) p[g] = r[g] = _mm512_setzero_ps();
    #pragma GCC unroll 8
    for (int v = 0; v < nv; ++v) {
        const __m512 x = _mm512_set1_ps(q[16 * v + l]), y = _mm512_set1_ps(q[16 * v + l + 8]);
        const float* k0 = kt + size_t(16 * v + l) * kAttentionTile;
        const float* k1 = k0 + 8 * kAttentionTile;
        #pragma GCC unroll 4
        for (int g = 0; g < KG; ++g) {
            p[g] = _mm512_fmadd_ps(x, _mm512_load_ps(k0 + 16 * g), p[g]);
            r[g] = _mm512_fmadd_ps(y, _mm512_load_ps(k1 + 16 * g), r[g]);
        }
    }
    #pragma GCC unroll 4
    for (int g = 0; g < KG; ++g) b[g] = _mm512_add_ps(p[g], r[g]);
}

// The sum of lanes l, l+4 after the first level: (P_l + P_{l+8}) + (P_{l+4} + P_{l+12}).
template <int NV, int KG>
[[gnu::always_inline]] inline void lane_quad(const float* q, const float* kt, int nv, int l, __m512 (&c)[KG]) {
    __m512 b[KG], b4[KG];
    lane_pair<NV, KG>(q, kt, nv, l, b);
    lane_pair<NV, KG>(q, kt, nv, l + 4, b4);
    #pragma GCC unroll 4
    for (int g = 0; g < KG; ++g) c[g] = _mm512_add_ps(b[g], b4[g]);
}

// s[16 g + j] for the KG groups from kt's column: scale * ((C0 + C2) + (C1 + C3)).
template <int NV, int KG>
[[gnu::always_inline]] inline void scores_transposed_groups(const float* q, const float* kt, int nv, float scale, float* s) {
    __m512 c0[KG], c2[KG], e0[KG], c1[KG], c3[KG];
    lane_quad<NV, KG>(q, kt, nv, 0, c0);
    lane_quad<NV, KG>(q, kt, nv, 2, c2);
    #pragma GCC unroll 4
    for (int g = 0; g < KG; ++g) e0[g] = _mm512_add_ps(c0[g], c2[g]);
    lane_quad<NV, KG>(q, kt, nv, 1, c1);
    lane_quad<NV, KG>(q, kt, nv, 3, c3);
    const __m512 sv = _mm512_set1_ps(scale);
    #pragma GCC unroll 4
    for (int g = 0; g < KG; ++g)
        _mm512_storeu_ps(s + 16 * g, _mm512_mul_ps(_mm512_add_ps(e0[g], _mm512_add_ps(c1[g], c3[g])), sv));
}

template <int NV>
inline void scores_transposed_nv(const float* q, const float* kt, int g0, int g1, int nv, float scale, float* s) {
    for (int g = g0; g < g1; g += 4) {
        const float* k = kt + 16 * g;
        switch (std::min(4, g1 - g)) {
            case 4: scores_transposed_groups<NV, 4>(q, k, nv, scale, s + 16 * g); break;
            case 3: scores_transposed_groups<NV, 3>(q, k, nv, scale, s + 16 * g); break;
            case 2: scores_transposed_groups<NV, 2>(q, k, nv, scale, s + 16 * g); break;
            default: scores_transposed_groups<NV, 1>(q, k, nv, scale, s + 16 * g); break;
        }
    }
}

struct Avx512Ops {
    static constexpr bool kTransposedScores = true;
    template <kv::KvDtype DT>
    static void convert_transposed(const uint8_t* const* rows, int n, int d, int ld, float* kt) {
        for (int g = 0; g < (n + 15) / 16; ++g)
            for (int c0 = 0; c0 < ld; c0 += 16) {
                const __mmask16 m = chunk_mask(c0 / 16, d);
                __m512 r[16];
                #pragma GCC unroll 16
                for (int k = 0; k < 16; ++k) r[k] = 16 * g + k < n ? load16<DT>(rows[16 * g + k], c0, m) : _mm512_setzero_ps();
                transpose16(r);
                #pragma GCC unroll 16
                for (int l = 0; l < 16; ++l) _mm512_store_ps(kt + size_t(c0 + l) * kAttentionTile + 16 * g, r[l]);
            }
    }
    static void scores_transposed(const float* q, const float* kt, int g0, int g1, int d, float scale, float* s) {
        if (d == 64) scores_transposed_nv<4>(q, kt, g0, g1, 4, scale, s);
        else if (d == 128) scores_transposed_nv<8>(q, kt, g0, g1, 8, scale, s);
        else scores_transposed_nv<0>(q, kt, g0, g1, (d + 15) / 16, scale, s);
    }
    template <kv::KvDtype DT>
    static void convert(const uint8_t* const* rows, int n, int d, int ld, float* dst) {
        for (int r = 0; r < n; ++r) {
            float* o = dst + size_t(r) * ld;
            for (int i = 0; i < ld; i += 16) {  // zero-masked loads past d give the zero padding
                const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : d > i ? tail_mask(d - i) : __mmask16(0);
                _mm512_store_ps(o + i, load16<DT>(rows[r], i, m));
            }
        }
    }
    template <kv::KvDtype DT>
    static void scores(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s) {
        const __m512 sv = _mm512_set1_ps(scale);
        for (int j = 0; j < n; j += 16) {
            __m512 r;
            if (d == 64) r = scores16<DT, 4, true>(q, rows + j, 4, d);
            else if (d == 128) r = scores16<DT, 8, true>(q, rows + j, 8, d);
            else r = scores16<DT, 0, false>(q, rows + j, (d + 15) / 16, d);
            if constexpr (DT == kv::KvDtype::q8) {
                alignas(64) float rs[16];
                for (int k = 0; k < 16; ++k) rs[k] = q8_scale(rows[j + k], d);
                r = _mm512_mul_ps(r, _mm512_load_ps(rs));
            }
            _mm512_storeu_ps(s + j, _mm512_mul_ps(r, sv));
        }
    }
    template <kv::KvDtype DT>
    static void accumulate(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows, int n,
                           int d) {
        switch (heads) {
            case 4: accumulate_heads<DT, 4>(acc, p, rows, n, d); break;
            case 3: accumulate_heads<DT, 3>(acc, p, rows, n, d); break;
            case 2: accumulate_heads<DT, 2>(acc, p, rows, n, d); break;
            default: accumulate_heads<DT, 1>(acc, p, rows, n, d); break;
        }
    }
    static void scale(float* acc, float c, int d) {  // d is a multiple of 16 (padded accumulator)
        const __m512 cv = _mm512_set1_ps(c);
        for (int i = 0; i < d; i += 16) _mm512_store_ps(acc + i, _mm512_mul_ps(_mm512_load_ps(acc + i), cv));
    }
    static float max(const float* s, int n) {
        __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        for (int j = 0; j < n; j += 16) {
            const __mmask16 mk = n - j >= 16 ? __mmask16(0xffff) : tail_mask(n - j);
            mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_maskz_loadu_ps(mk, s + j));
        }
        return _mm512_reduce_max_ps(mx);
    }
    static float exp_sum(float* s, int n, float m) {
        const __m512 mv = _mm512_set1_ps(m);
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < n; j += 16) {
            __mmask16 mk = n - j >= 16 ? __mmask16(0xffff) : tail_mask(n - j);
            __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mv));
            e = _mm512_maskz_mov_ps(mk, e);
            _mm512_mask_storeu_ps(s + j, mk, e);
            sum = _mm512_add_ps(sum, e);
        }
        return _mm512_reduce_add_ps(sum);
    }
};

}  // namespace

void attend_avx512(const Task& t) { walk<Avx512Ops>(t); }

}  // namespace pagoda::kernels::attention_detail
