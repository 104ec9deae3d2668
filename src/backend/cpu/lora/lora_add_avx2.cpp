// The LoRA row kernels (lora_kernels.h) on AVX2 + FMA + F16C, 8 lanes: down as on AVX-512 (two
// accumulators per row and rank row, 8-value chunks, the tail through a zero-padded copy; 4 or 2 rank
// rows side by side for 1 or 2 rows); up from B^T (its 16-output tiles, two 8-lane halves each) one
// accumulator per row and 8 outputs over the rank
// in order (4 or 2 blocks of 8 side by side), from B one dot product per output (the tail
// zero-padded) reduced in one fixed order. Side by side changes no value's order of operations. f16 widens with vcvtph2ps, bf16 with a shift: exact.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/lora/lora_kernels.h"

namespace pagoda::backend::cpu {
namespace {

// The first n (< 8) values at p, the rest zero.
inline __m256 load_tail(const float* p, int64_t n) {
    float buf[8] = {};
    std::memcpy(buf, p, size_t(n) * sizeof(float));
    return _mm256_loadu_ps(buf);
}

inline float reduce8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

template <LoraElem E>
inline __m256 load8(const void* p, int64_t i) {
    if constexpr (E == LoraElem::f32) {
        return _mm256_loadu_ps(static_cast<const float*>(p) + i);
    } else {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
        if constexpr (E == LoraElem::f16) return _mm256_cvtph_ps(h);
        else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
}

// The first n (< 8) values at p + i, the rest zero.
template <LoraElem E>
inline __m256 load8_tail(const void* p, int64_t i, int64_t n) {
    if constexpr (E == LoraElem::f32) {
        return load_tail(static_cast<const float*>(p) + i, n);
    } else {
        uint16_t buf[8] = {};
        std::memcpy(buf, static_cast<const uint16_t*>(p) + i, size_t(n) * sizeof(uint16_t));
        return load8<E>(buf, 0);
    }
}

// One 8-value chunk of J rank rows against R rows into `acc` (n < 8: the tail's values, zero-padded).
// Every loop is unrolled (the project builds at -O2): the accumulators must stay in registers.
template <LoraElem E, int R, int J, bool Tail>
__attribute__((always_inline)) inline void down_chunk(__m256 (&acc)[J][R], const void* a, int64_t a0, int64_t in,
                                                      const float* const (&x)[R], int64_t c, int64_t n) {
    __m256 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = Tail ? load_tail(x[r] + c, n) : _mm256_loadu_ps(x[r] + c);
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q) {
        const __m256 av = Tail ? load8_tail<E>(a, a0 + q * in + c, n) : load8<E>(a, a0 + q * in + c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r] = _mm256_fmadd_ps(av, xv[r], acc[q][r]);
    }
}

// J rank rows side by side (each with its own two accumulators per row, even and odd chunks: its sum
// is what it is alone).
template <LoraElem E, int R, int J>
void down_j(const LoraDown& d, int64_t j) {
    const int64_t in = d.in, full = in / 8 * 8, a0 = j * in;
    const float* x[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) x[r] = d.x[r];
    __m256 even[J][R], odd[J][R];
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) even[q][r] = odd[q][r] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= full; c += 16) {
        down_chunk<E, R, J, false>(even, d.a, a0, in, x, c, 8);
        down_chunk<E, R, J, false>(odd, d.a, a0, in, x, c + 8, 8);
    }
    bool odd_turn = false;  // whose turn the next chunk is
    if (c < full) {
        down_chunk<E, R, J, false>(even, d.a, a0, in, x, c, 8);
        c += 8;
        odd_turn = true;
    }
    if (c < in) {
        if (odd_turn) down_chunk<E, R, J, true>(odd, d.a, a0, in, x, c, in - c);
        else down_chunk<E, R, J, true>(even, d.a, a0, in, x, c, in - c);
    }
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) d.h[r][j + q] = reduce8(_mm256_add_ps(even[q][r], odd[q][r]));
}

template <LoraElem E, int R>
void down(const LoraDown& d) {
    constexpr int J = R == 1 ? 4 : R == 2 ? 2 : 1;
    int64_t j = d.j0;
    for (; j + J <= d.j1; j += J) down_j<E, R, J>(d, j);
    for (; j < d.j1; ++j) down_j<E, R, 1>(d, j);
}

template <LoraElem E>
void down_rows(const LoraDown& d) {
    switch (d.n_rows) {
        case 1: return down<E, 1>(d);
        case 2: return down<E, 2>(d);
        case 3: return down<E, 3>(d);
        default: return down<E, 4>(d);
    }
}

// NB blocks of 8 outputs side by side (independent FMA chains), each summing over the rank in order.
template <LoraElem E, int R, int NB>
void up_transposed_blocks(const LoraUp& u, int64_t o) {
    int64_t n[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) n[b] = std::clamp<int64_t>(u.o1 - (o + 8 * b), 0, 8);
    const float* h[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) h[r] = u.h[r];
    __m256 acc[NB][R];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[b][r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < u.rank; ++j) {
        __m256 hv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) hv[r] = _mm256_set1_ps(h[r][j]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
            if (n[b] == 0) continue;
            // The tile's padding is zero and in bounds, so a tail block reads all 8 lanes too.
            const __m256 bv = load8<E>(u.bt, lora_bt_index(u.rank, j, o + 8 * b));
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) acc[b][r] = _mm256_fmadd_ps(hv[r], bv, acc[b][r]);
        }
    }
    const __m256 scale = _mm256_set1_ps(u.scale);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            if (n[b] == 0) continue;
            float* y = u.y[r] + o + 8 * b;
            if (n[b] == 8) {
                _mm256_storeu_ps(y, _mm256_fmadd_ps(scale, acc[b][r], _mm256_loadu_ps(y)));
                continue;
            }
            float buf[8] = {};
            std::memcpy(buf, y, size_t(n[b]) * sizeof(float));
            _mm256_storeu_ps(buf, _mm256_fmadd_ps(scale, acc[b][r], _mm256_loadu_ps(buf)));
            std::memcpy(y, buf, size_t(n[b]) * sizeof(float));
        }
}

template <LoraElem E, int R>
void up_transposed(const LoraUp& u) {
    constexpr int NB = R == 1 ? 4 : 2;
    for (int64_t o = u.o0; o < u.o1; o += 8 * NB) up_transposed_blocks<E, R, NB>(u, o);
}

template <LoraElem E>
void up_transposed_rows(const LoraUp& u) {
    switch (u.n_rows) {
        case 1: return up_transposed<E, 1>(u);
        case 2: return up_transposed<E, 2>(u);
        case 3: return up_transposed<E, 3>(u);
        default: return up_transposed<E, 4>(u);
    }
}

}  // namespace

void lora_down_avx2(const LoraDown& d) {
    switch (d.elem) {
        case LoraElem::f32: return down_rows<LoraElem::f32>(d);
        case LoraElem::f16: return down_rows<LoraElem::f16>(d);
        case LoraElem::bf16: return down_rows<LoraElem::bf16>(d);
    }
}

void lora_up_avx2(const LoraUp& u) {
    if (u.bt) {
        switch (u.elem) {
            case LoraElem::f32: return up_transposed_rows<LoraElem::f32>(u);
            case LoraElem::f16: return up_transposed_rows<LoraElem::f16>(u);
            case LoraElem::bf16: return up_transposed_rows<LoraElem::bf16>(u);
        }
    }
    const int64_t rank = u.rank, full = rank / 8 * 8;
    for (int r = 0; r < u.n_rows; ++r)
        for (int64_t o = u.o0; o < u.o1; ++o) {
            const float* b = u.b + o * rank;  // f32 B
            __m256 acc = _mm256_setzero_ps();
            int64_t c = 0;
            for (; c < full; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(b + c), _mm256_loadu_ps(u.h[r] + c), acc);
            if (c < rank) acc = _mm256_fmadd_ps(load_tail(b + c, rank - c), load_tail(u.h[r] + c, rank - c), acc);
            // y + scale * sum, as one fused step in the vector unit's rounding.
            const __m128 y = _mm_set_ss(u.y[r][o]);
            u.y[r][o] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(u.scale), _mm_set_ss(reduce8(acc)), y));
        }
}

}  // namespace pagoda::backend::cpu
