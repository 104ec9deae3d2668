// Internal: sixteen vectors reduced across their lanes at once, lane j of the result = Op over the
// 16 lanes of a[j], always paired the same way (lanes 8 apart, then 4, 2, 1; each step combines two
// vectors' halves into one, a transposing tree of 15 shuffle pairs). Used for the scores of 16 keys
// (attention_avx512.cpp: Op = f32 add, so each score's lane sums are in this fixed order) and for
// 16 blocks' maxima and code sums (int8_quantize_avx512.h). Op: a type with
// static __m512 apply(__m512, __m512) (integer ops read the registers' bits). Include only from TUs
// compiled with the AVX-512 flags; internal linkage.
#pragma once
#include <immintrin.h>

namespace pagoda::backend::cpu::detail {
namespace {

struct AddPs {
    static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
};
struct MaxPs {
    static __m512 apply(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
};
struct AddEpi32 {  // int32 lanes held in float registers
    static __m512 apply(__m512 a, __m512 b) {
        return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
    }
};

template <class Op>
inline __m512 lanes16(const __m512* a) {
    __m512 b[8], c[4], e[2];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)  // lanes 8 apart; 256-bit halves: [a_k | a_k+8]
        b[k] = Op::apply(_mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[k], a[k + 8], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)  // lanes 4 apart; 128-bit quarters: [a_k, a_k+8, a_k+4, a_k+12]
        c[k] = Op::apply(_mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[k], b[k + 4], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k)  // lanes 2 apart
        e[k] = Op::apply(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]))),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(c[k]), _mm512_castps_pd(c[k + 2]))));
    // Lanes 1 apart; lane 4Q + {0, 1, 2, 3} then holds vector [0, 2, 1, 3][.] + {0, 8, 4, 12}[Q].
    const __m512 f = Op::apply(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    return _mm512_permutexvar_ps(order, f);
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
