// AVX2 + FMA + F16C path of the paged attention kernel: K/V tiles widened to f32 (scalar lanes for a
// head_dim tail), scores 8 keys at a time (one FMA chain per key, a shuffle tree to sum the lanes of
// all 8 at once), P.V with up to 4 heads sharing each V row, a vectorised exp for the softmax tile.
// q8 rows are widened in registers (sign-extend, convert) and scaled per row: the 8 scores by their
// rows' scales, each V row's weight p by its scale.
#include <cstring>
#include <immintrin.h>
#include <limits>

#include "backend/cpu/attention/attention_walk.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::attention_detail {
namespace {

using S = simd::Avx2;  // hsum, sum8 (the scores' lane sums), exp_nonpositive (the softmax)

template <kv::KvDtype DT>
inline __m256 load8(const uint8_t* row, int i) {
    if constexpr (DT == kv::KvDtype::f32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
    } else if constexpr (DT == kv::KvDtype::q8) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i))));
    } else if constexpr (DT == kv::KvDtype::f16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    } else {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
}

// One element, without the scalar helpers of core/half.h (inline functions shared with
// baseline translation units must not be compiled with AVX flags here).
template <kv::KvDtype DT>
inline float load1(const uint8_t* row, int i) {
    if constexpr (DT == kv::KvDtype::f32) {
        float f;
        std::memcpy(&f, row + 4 * i, 4);
        return f;
    } else if constexpr (DT == kv::KvDtype::q8) {
        return float(int8_t(row[i]));
    } else {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        if constexpr (DT == kv::KvDtype::f16) {
            return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
        } else {
            uint32_t u = uint32_t(h) << 16;
            float f;
            std::memcpy(&f, &u, 4);
            return f;
        }
    }
}

// A q8 row's scale, after its d codes padded to 4 bytes: kv::q8_scale_offset, restated here because
// a shared inline function must not be compiled with this file's ISA flags.
inline float q8_scale(const uint8_t* row, int d) {
    float f;
    std::memcpy(&f, row + (size_t(d) + 3) / 4 * 4, 4);
    return f;
}

// Elements i..i+7 of a row of d widened to f32, zero past d.
template <kv::KvDtype DT>
inline __m256 load8_part(const uint8_t* row, int i, int d) {
    if (i + 8 <= d) return load8<DT>(row, i);
    alignas(32) float part[8] = {};
    for (int k = 0; i + k < d; ++k) part[k] = load1<DT>(row, i + k);
    return _mm256_load_ps(part);
}

// Scores of 8 key rows: one FMA chain per key over the row's 8-element chunks in order (lanes past d
// read as zero; ld / 8 chunks, ld = padded_dim(d)), then reduce8. FULL: d is NV whole chunks.
template <kv::KvDtype DT, int NV, bool FULL>
inline __m256 scores8(const float* q, const uint8_t* const* rows, int nv, int d) {
    if constexpr (NV > 0) nv = NV;
    __m256 a[8];
    #pragma GCC unroll 16
    for (int r = 0; r < 8; ++r) a[r] = _mm256_setzero_ps();
    #pragma GCC unroll 16
    for (int v = 0; v < nv; ++v) {
        const __m256 qv = _mm256_load_ps(q + 8 * v);
        #pragma GCC unroll 16
        for (int r = 0; r < 8; ++r)
            a[r] = _mm256_fmadd_ps(qv, FULL ? load8<DT>(rows[r], 8 * v) : load8_part<DT>(rows[r], 8 * v, d), a[r]);
    }
    return S::sum8(a);
}

// acc[h][c] += p[h][j] * v[j][c] for j in order, for H heads, two 8-float chunks at a time; with
// row scales rs_of (Scaled: f32 rows holding q8 codes), the weight is p[h][j] * rs_of[j], as a q8
// row's own.
template <kv::KvDtype DT, int H, bool Scaled = false>
inline void accumulate_heads(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d,
                             const float* rs_of = nullptr) {
    const int ld = padded_dim(d);
    for (int c0 = 0; c0 < ld / 8; c0 += 2) {  // ld is a multiple of 16
        __m256 a[H][2];
        #pragma GCC unroll 16
        for (int h = 0; h < H; ++h)
            #pragma GCC unroll 16
            for (int c = 0; c < 2; ++c) a[h][c] = _mm256_load_ps(acc[h] + 8 * (c0 + c));
        const bool full = 8 * c0 + 16 <= d;
        for (int j = 0; j < n; ++j) {
            const __m256 v0 = full ? load8<DT>(rows[j], 8 * c0) : load8_part<DT>(rows[j], 8 * c0, d);
            const __m256 v1 = full ? load8<DT>(rows[j], 8 * c0 + 8) : load8_part<DT>(rows[j], 8 * c0 + 8, d);
            const float rs = DT == kv::KvDtype::q8 ? q8_scale(rows[j], d) : Scaled ? rs_of[j] : 1.0f;
            #pragma GCC unroll 16
            for (int h = 0; h < H; ++h) {
                const __m256 pv = _mm256_set1_ps(DT == kv::KvDtype::q8 || Scaled ? p[h][j] * rs : p[h][j]);
                a[h][0] = _mm256_fmadd_ps(pv, v0, a[h][0]);
                a[h][1] = _mm256_fmadd_ps(pv, v1, a[h][1]);
            }
        }
        #pragma GCC unroll 16
        for (int h = 0; h < H; ++h)
            #pragma GCC unroll 16
            for (int c = 0; c < 2; ++c) _mm256_store_ps(acc[h] + 8 * (c0 + c), a[h][c]);
    }
}

struct Avx2Ops {
    template <kv::KvDtype DT>
    static void convert(const uint8_t* const* rows, int n, int d, int ld, float* dst) {
        for (int r = 0; r < n; ++r) {
            float* o = dst + size_t(r) * ld;
            int i = 0;
            for (; i + 8 <= d; i += 8) _mm256_store_ps(o + i, load8<DT>(rows[r], i));
            for (; i < d; ++i) o[i] = load1<DT>(rows[r], i);
            for (; i < ld; ++i) o[i] = 0.0f;
        }
    }
    template <kv::KvDtype DT>
    static void scores(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s,
                       const float* rs = nullptr) {
        const __m256 sv = _mm256_set1_ps(scale);
        for (int j = 0; j < n; j += 8) {
            __m256 r;
            if (d == 64) r = scores8<DT, 8, true>(q, rows + j, 8, d);
            else if (d == 128) r = scores8<DT, 16, true>(q, rows + j, 16, d);
            else r = scores8<DT, 0, false>(q, rows + j, padded_dim(d) / 8, d);
            if (rs) r = _mm256_mul_ps(r, _mm256_loadu_ps(rs + j));  // widened q8 codes: as below
            if constexpr (DT == kv::KvDtype::q8) {
                const uint8_t* const* rj = rows + j;
                r = _mm256_mul_ps(r, _mm256_setr_ps(q8_scale(rj[0], d), q8_scale(rj[1], d), q8_scale(rj[2], d),
                                                    q8_scale(rj[3], d), q8_scale(rj[4], d), q8_scale(rj[5], d),
                                                    q8_scale(rj[6], d), q8_scale(rj[7], d)));
            }
            _mm256_storeu_ps(s + j, _mm256_mul_ps(r, sv));
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
    // Widened q8 tiles (codes as f32, row scales beside; scores<f32> takes the scales too):
    // accumulate<f32> with each weight p[h][j] * rs[j], as accumulate<q8> on the rows in place.
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
        const __m256 cv = _mm256_set1_ps(c);
        for (int i = 0; i < d; i += 8) _mm256_store_ps(acc + i, _mm256_mul_ps(_mm256_load_ps(acc + i), cv));
    }
    static float max(const float* s, int n) {
        __m256 mx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        int j = 0;
        for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float best = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        for (; j < n; ++j) best = s[j] > best ? s[j] : best;
        return best;
    }
    static float exp_sum(float* s, int n, float m) {
        const __m256 mv = _mm256_set1_ps(m);
        __m256 sum = _mm256_setzero_ps();
        int j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 e = S::exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
            _mm256_storeu_ps(s + j, e);
            sum = _mm256_add_ps(sum, e);
        }
        if (j < n) {
            alignas(32) float tail[8];
            for (int i = 0; i < 8; ++i) tail[i] = j + i < n ? s[j + i] : m - 1000.0f;  // -> exp = 0
            __m256 e = S::exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), mv));
            _mm256_store_ps(tail, e);
            for (int i = 0; j + i < n; ++i) s[j + i] = tail[i];
            sum = _mm256_add_ps(sum, e);
        }
        return S::hsum(sum);
    }
};

}  // namespace

void attend_avx2(const Task& t) { walk<Avx2Ops>(t); }

}  // namespace pagoda::backend::cpu::attention_detail
