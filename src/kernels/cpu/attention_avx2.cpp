// AVX2 + FMA + F16C path of the paged attention kernel: 8-lane dot products and V accumulation,
// a vectorised exp for the softmax tile; head_dim not a multiple of 8 finishes with scalar lanes.
#include <cstring>
#include <immintrin.h>

#include "kernels/cpu/attention_walk.h"

namespace pagoda::kernels::attention_detail {
namespace {

template <kv::KvDtype DT>
inline __m256 load8(const uint8_t* row, int i) {
    if constexpr (DT == kv::KvDtype::f32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
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

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// exp(x) for x <= 0 (Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-7 polynomial, scale by 2^n);
// about 1 ulp, and exactly 0 below -87.3 where float exp underflows to subnormals.
inline __m256 exp_nonpositive(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(underflow, y);
}

struct Avx2Ops {
    template <kv::KvDtype DT>
    static float dot(const float* q, const uint8_t* k, int d) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        int i = 0;
        for (; i + 16 <= d; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<DT>(k, i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8<DT>(k, i + 8), a1);
        }
        if (i + 8 <= d) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<DT>(k, i), a0);
            i += 8;
        }
        float sum = hsum(_mm256_add_ps(a0, a1));
        for (; i < d; ++i) sum += q[i] * load1<DT>(k, i);
        return sum;
    }
    template <kv::KvDtype DT>
    static void axpy(float* acc, float p, const uint8_t* v, int d) {
        const __m256 pv = _mm256_set1_ps(p);
        int i = 0;
        for (; i + 8 <= d; i += 8)
            _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, load8<DT>(v, i), _mm256_loadu_ps(acc + i)));
        for (; i < d; ++i) acc[i] += p * load1<DT>(v, i);
    }
    static void scale(float* acc, float c, int d) {  // d is a multiple of 16 (padded accumulator)
        const __m256 cv = _mm256_set1_ps(c);
        for (int i = 0; i < d; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), cv));
    }
    static float exp_sum(float* s, int n, float m) {
        const __m256 mv = _mm256_set1_ps(m);
        __m256 sum = _mm256_setzero_ps();
        int j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
            _mm256_storeu_ps(s + j, e);
            sum = _mm256_add_ps(sum, e);
        }
        if (j < n) {
            alignas(32) float tail[8];
            for (int i = 0; i < 8; ++i) tail[i] = j + i < n ? s[j + i] : m - 1000.0f;  // -> exp = 0
            __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), mv));
            _mm256_store_ps(tail, e);
            for (int i = 0; j + i < n; ++i) s[j + i] = tail[i];
            sum = _mm256_add_ps(sum, e);
        }
        return hsum(sum);
    }
};

}  // namespace

void attend_avx2(const Task& t) { walk<Avx2Ops>(t); }

}  // namespace pagoda::kernels::attention_detail
