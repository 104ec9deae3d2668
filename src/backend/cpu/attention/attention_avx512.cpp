// AVX-512 (F/BW/VL) path of the paged attention kernel: K/V tiles widened to f32 with masked loads
// (any head_dim), scores 16 keys at a time (one FMA chain per key, a shuffle tree to sum the lanes of
// all 16 at once), P.V with up to 4 heads sharing each V row, a vectorised exp for the softmax tile.
// q8 rows are widened in registers (masked byte load, sign-extend, convert) and scaled per row: the
// 16 scores by their rows' scales, each V row's weight p by its scale.
#include <immintrin.h>
#include <limits>

// GCC 12's AVX-512 headers implement several unmasked intrinsics on top of _mm512_undefined_*(),
// which trips a false -Wmaybe-uninitialized (or, inlined deeper, -Wuninitialized) when inlined
// (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "backend/cpu/attention/attention_walk.h"
#include "backend/cpu/simd/avx512.h"

namespace pagoda::backend::cpu::attention_detail {
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

// Sums each of 16 vectors across its lanes: lane j of the result is the sum of a[j]'s lanes, always
// paired the same way (lanes 8 apart, then 4, 2, 1), whichever key a vector holds.
inline __m512 reduce16(const __m512* a) { return simd::Avx512::lanes16<simd::AddPs>(a); }

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

// acc[h][c] += p[h][j] * v[j][c] for j in order, for H heads and CW 16-float chunks from chunk c0;
// with row scales rs (f32 rows holding q8 codes), the weight is p[h][j] * rs[j], as a q8 row's own.
template <kv::KvDtype DT, int H, int CW, bool Scaled>
inline void accumulate_block(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d,
                             int c0, const float* rs_of) {
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
        const float rs = DT == kv::KvDtype::q8 ? q8_scale(rows[j], d) : Scaled ? rs_of[j] : 1.0f;
        #pragma GCC unroll 16
        for (int h = 0; h < H; ++h) {
            const __m512 pv = _mm512_set1_ps(DT == kv::KvDtype::q8 || Scaled ? p[h][j] * rs : p[h][j]);
            #pragma GCC unroll 16
            for (int c = 0; c < CW; ++c) a[h][c] = _mm512_fmadd_ps(pv, vv[c], a[h][c]);
        }
    }
    #pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
        #pragma GCC unroll 16
        for (int c = 0; c < CW; ++c) _mm512_store_ps(acc[h] + 16 * (c0 + c), a[h][c]);
}

template <kv::KvDtype DT, int H, bool Scaled = false>
inline void accumulate_heads(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d,
                             const float* rs_of = nullptr) {
    const int nv = (d + 15) / 16;
    int c0 = 0;
    #pragma GCC unroll 16
    for (; c0 + 4 <= nv; c0 += 4) accumulate_block<DT, H, 4, Scaled>(acc, p, rows, n, d, c0, rs_of);
    switch (nv - c0) {
        case 3: accumulate_block<DT, H, 3, Scaled>(acc, p, rows, n, d, c0, rs_of); break;
        case 2: accumulate_block<DT, H, 2, Scaled>(acc, p, rows, n, d, c0, rs_of); break;
        case 1: accumulate_block<DT, H, 1, Scaled>(acc, p, rows, n, d, c0, rs_of); break;
        default: break;
    }
}

// The scores of 8 keys from their lane vectors a[k] (what scores16 holds before reduce16), key k
// in lane k of the result: the lanes of each are summed in reduce16's pairs (8 apart, then 4, 2,
// 1), so each score is the same value, bit for bit; the vectors are only arranged differently.
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
        return [r8](int r, int v) { return load16<DT>(r8[r], 16 * v, __mmask16(0xffff)); };
    });
}

struct Avx512Ops {
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
    template <kv::KvDtype DT>
    static void convert(const uint8_t* const* rows, int n, int d, int ld, float* dst) {
        if (d == 64 || d == 128) {  // whole chunks: the rows' loads issued together, four chunks at a time
            for (int r = 0; r < n; ++r)
                for (int i = 0; i < d; i += 64) {
                    __m512 c[4];
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; ++k) c[k] = load16<DT>(rows[r], i + 16 * k, __mmask16(0xffff));
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; ++k) _mm512_store_ps(dst + size_t(r) * ld + i + 16 * k, c[k]);
                }
            return;
        }
        for (int r = 0; r < n; ++r) {
            float* o = dst + size_t(r) * ld;
            for (int i = 0; i < ld; i += 16) {  // zero-masked loads past d give the zero padding
                const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : d > i ? tail_mask(d - i) : __mmask16(0);
                _mm512_store_ps(o + i, load16<DT>(rows[r], i, m));
            }
        }
    }
    template <kv::KvDtype DT>
    static void scores(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s,
                       const float* rs_of = nullptr) {
        const __m512 sv = _mm512_set1_ps(scale);
        for (int j = 0; j < n; j += 16) {
            __m512 r;
            if (d == 64) r = scores16<DT, 4, true>(q, rows + j, 4, d);
            else if (d == 128) r = scores16<DT, 8, true>(q, rows + j, 8, d);
            else r = scores16<DT, 0, false>(q, rows + j, (d + 15) / 16, d);
            if (rs_of) r = _mm512_mul_ps(r, _mm512_loadu_ps(rs_of + j));  // widened q8 codes: as below
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
    // accumulate<f32> with each weight p[h][j] * rs[j] (a widened q8 tile: codes and row scales).
    static void accumulate_scaled(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows, int n,
                                  int d, const float* rs) {
        switch (heads) {
            case 4: accumulate_heads<kv::KvDtype::f32, 4, true>(acc, p, rows, n, d, rs); break;
            case 3: accumulate_heads<kv::KvDtype::f32, 3, true>(acc, p, rows, n, d, rs); break;
            case 2: accumulate_heads<kv::KvDtype::f32, 2, true>(acc, p, rows, n, d, rs); break;
            default: accumulate_heads<kv::KvDtype::f32, 1, true>(acc, p, rows, n, d, rs); break;
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
            __m512 e = simd::Avx512::exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mv));
            e = _mm512_maskz_mov_ps(mk, e);
            _mm512_mask_storeu_ps(s + j, mk, e);
            sum = _mm512_add_ps(sum, e);
        }
        return _mm512_reduce_add_ps(sum);
    }
};

}  // namespace

void attend_avx512(const Task& t) { walk<Avx512Ops>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
