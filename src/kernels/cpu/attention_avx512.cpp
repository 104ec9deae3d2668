// AVX-512 (F/BW/VL) path of the paged attention kernel: 16-lane dot products and V accumulation with
// masked tails (any head_dim without scalar loops), and a vectorised exp for the softmax tile.
#include <immintrin.h>

// GCC 12's AVX-512 headers implement several unmasked intrinsics on top of _mm512_undefined_*(),
// which trips a false -Wmaybe-uninitialized when inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/attention_walk.h"

namespace pagoda::kernels::attention_detail {
namespace {

inline __mmask16 tail_mask(int n) { return __mmask16((1u << n) - 1u); }

// Loads n <= 16 elements (the rest zero) from element index i of a row, widened to f32.
template <kv::KvDtype DT>
inline __m512 load16(const uint8_t* row, int i, __mmask16 m) {
    if constexpr (DT == kv::KvDtype::f32) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
    } else if constexpr (DT == kv::KvDtype::f16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    } else {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
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

// Tile-wide versions for the common head sizes (NV = head_dim / 16 vectors): q and the accumulator
// live in registers across the tile's rows. Per element they perform exactly the operations of
// Avx512Ops::dot / ::axpy in the same order, so results are bit-identical to the generic path.
template <kv::KvDtype DT, int NV>
inline void dots_regs(const float* q, const uint8_t* const* rows, int n, float scale, float* s) {
    __m512 qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_ps(q + 16 * v);
    int j = 0;
    for (; j + 2 <= n; j += 2) {  // two rows at once: four independent FMA chains
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
        for (int v = 0; v < NV; v += 2) {
            a0 = _mm512_fmadd_ps(qv[v], load16<DT>(rows[j], 16 * v, 0xffff), a0);
            a1 = _mm512_fmadd_ps(qv[v + 1], load16<DT>(rows[j], 16 * v + 16, 0xffff), a1);
            b0 = _mm512_fmadd_ps(qv[v], load16<DT>(rows[j + 1], 16 * v, 0xffff), b0);
            b1 = _mm512_fmadd_ps(qv[v + 1], load16<DT>(rows[j + 1], 16 * v + 16, 0xffff), b1);
        }
        s[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
        s[j + 1] = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1)) * scale;
    }
    for (; j < n; ++j) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int v = 0; v < NV; v += 2) {
            a0 = _mm512_fmadd_ps(qv[v], load16<DT>(rows[j], 16 * v, 0xffff), a0);
            a1 = _mm512_fmadd_ps(qv[v + 1], load16<DT>(rows[j], 16 * v + 16, 0xffff), a1);
        }
        s[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
    }
}

template <kv::KvDtype DT, int NV>
inline void accumulate_regs(float* acc, const float* p, const uint8_t* const* rows, int n) {
    __m512 a[NV];
    for (int v = 0; v < NV; ++v) a[v] = _mm512_loadu_ps(acc + 16 * v);
    for (int j = 0; j < n; ++j) {
        const __m512 pv = _mm512_set1_ps(p[j]);
        for (int v = 0; v < NV; ++v) a[v] = _mm512_fmadd_ps(pv, load16<DT>(rows[j], 16 * v, 0xffff), a[v]);
    }
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + 16 * v, a[v]);
}

struct Avx512Ops {
    template <kv::KvDtype DT>
    static void dots(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s) {
        if (d == 128) return dots_regs<DT, 8>(q, rows, n, scale, s);
        if (d == 64) return dots_regs<DT, 4>(q, rows, n, scale, s);
        for (int j = 0; j < n; ++j) s[j] = dot<DT>(q, rows[j], d) * scale;
    }
    template <kv::KvDtype DT>
    static void accumulate(float* acc, const float* p, const uint8_t* const* rows, int n, int d) {
        if (d == 128) return accumulate_regs<DT, 8>(acc, p, rows, n);
        if (d == 64) return accumulate_regs<DT, 4>(acc, p, rows, n);
        for (int j = 0; j < n; ++j) axpy<DT>(acc, p[j], rows[j], d);
    }
    template <kv::KvDtype DT>
    static float dot(const float* q, const uint8_t* k, int d) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        int i = 0;
        for (; i + 32 <= d; i += 32) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load16<DT>(k, i, 0xffff), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), load16<DT>(k, i + 16, 0xffff), a1);
        }
        for (; i < d; i += 16) {
            __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : tail_mask(d - i);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load16<DT>(k, i, m), a0);
        }
        return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    }
    template <kv::KvDtype DT>
    static void axpy(float* acc, float p, const uint8_t* v, int d) {
        // acc is padded to a multiple of 16 floats, so full-width accumulator access is safe; only
        // the V row read needs the mask.
        const __m512 pv = _mm512_set1_ps(p);
        for (int i = 0; i < d; i += 16) {
            __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : tail_mask(d - i);
            _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(pv, load16<DT>(v, i, m), _mm512_loadu_ps(acc + i)));
        }
    }
    static void scale(float* acc, float c, int d) {  // d is a multiple of 16 (padded accumulator)
        const __m512 cv = _mm512_set1_ps(c);
        for (int i = 0; i < d; i += 16) _mm512_storeu_ps(acc + i, _mm512_mul_ps(_mm512_loadu_ps(acc + i), cv));
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
