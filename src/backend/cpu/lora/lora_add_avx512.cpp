// The LoRA row kernels (lora_kernels.h) on AVX-512, 16 lanes. down: two accumulators per row and
// rank row (even and odd 16-value chunks of A's row, the tail masked into the one whose turn it is),
// added, then reduced in _mm512_reduce_add_ps's fixed order; 4 rank rows side by side for one row
// (so the FMA chains overlap), else 2 (each x chunk loaded once for two rank rows). up from B^T (its
// 16-output tiles): one accumulator per row and 16 outputs, FMAs over the rank in order, 2 or 4
// blocks of 16 outputs side by side. up from B: one accumulator
// per output over B's row and h in 16-value chunks (tail masked), then one fixed transpose-and-add
// tree turns 16 accumulators into 16 sums. Then y = scale * sums + y. Running chains side by side
// changes no value's order of operations. f16 widens with vcvtph2ps, bf16 with a 16-bit shift: exact.
// GCC 12 warns falsely on the _mm512_undefined_* inside some intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/lora/lora_kernels.h"

namespace pagoda::backend::cpu {
namespace {

inline __mmask16 tail_mask(int64_t n) { return __mmask16((1u << n) - 1u); }

template <LoraElem E>
inline __m512 load16(const void* p, int64_t i) {
    if constexpr (E == LoraElem::f32) {
        return _mm512_loadu_ps(static_cast<const float*>(p) + i);
    } else {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
        if constexpr (E == LoraElem::f16) return _mm512_cvtph_ps(h);
        else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

template <LoraElem E>
inline __m512 load16(const void* p, int64_t i, __mmask16 m) {
    if constexpr (E == LoraElem::f32) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
    } else {
        const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
        if constexpr (E == LoraElem::f16) return _mm512_cvtph_ps(h);
        else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

// One 16-value chunk of J rank rows against R rows into `acc` (mask: the tail's lanes, else all).
// Every loop is unrolled (the project builds at -O2): the accumulators must stay in registers; a
// loop over them left rolled keeps them on the stack, a store and a reload per FMA.
template <LoraElem E, int R, int J, bool Masked>
__attribute__((always_inline)) inline void down_chunk(__m512 (&acc)[J][R], const void* a, int64_t a0, int64_t in,
                                                      const float* const (&x)[R], int64_t c, __mmask16 m) {
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = Masked ? _mm512_maskz_loadu_ps(m, x[r] + c) : _mm512_loadu_ps(x[r] + c);
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q) {
        const __m512 av = Masked ? load16<E>(a, a0 + q * in + c, m) : load16<E>(a, a0 + q * in + c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r] = _mm512_fmadd_ps(av, xv[r], acc[q][r]);
    }
}

// J rank rows at a time (each with its own two accumulators per row and rank row, `even` and `odd`
// chunks, so its sum is what it is alone): with one row, 2 x 1 chains would leave the FMA latency
// exposed; with more, each x chunk serves J rank rows.
template <LoraElem E, int R, int J>
void down_j(const LoraDown& d, int64_t j) {
    const int64_t in = d.in, full = in / 16 * 16, a0 = j * in;
    const float* x[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) x[r] = d.x[r];
    __m512 even[J][R], odd[J][R];
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) even[q][r] = odd[q][r] = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 32 <= full; c += 32) {
        down_chunk<E, R, J, false>(even, d.a, a0, in, x, c, 0);
        down_chunk<E, R, J, false>(odd, d.a, a0, in, x, c + 16, 0);
    }
    bool odd_turn = false;  // whose turn the next chunk is
    if (c < full) {
        down_chunk<E, R, J, false>(even, d.a, a0, in, x, c, 0);
        c += 16;
        odd_turn = true;
    }
    if (c < in) {
        if (odd_turn) down_chunk<E, R, J, true>(odd, d.a, a0, in, x, c, tail_mask(in - c));
        else down_chunk<E, R, J, true>(even, d.a, a0, in, x, c, tail_mask(in - c));
    }
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) d.h[r][j + q] = _mm512_reduce_add_ps(_mm512_add_ps(even[q][r], odd[q][r]));
}

template <LoraElem E, int R>
void down(const LoraDown& d) {
    constexpr int J = R == 1 ? 4 : 2;  // 2 x J x R accumulators + R x + J A: at most 22 of 32 registers
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

// From B^T: NB blocks of 16 outputs at a time (independent FMA chains: one block per row would leave
// the FMA latency exposed), each row's accumulator per block summing over the rank in order.
template <LoraElem E, int R, int NB>
void up_transposed_blocks(const LoraUp& u, int64_t o) {
    __mmask16 m[NB];
    bool whole = true;
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
        const int64_t n = std::clamp<int64_t>(u.o1 - (o + 16 * b), 0, 16);
        m[b] = n == 16 ? __mmask16(0xffff) : tail_mask(n);
        whole = whole && n == 16;
    }
    const float* h[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) h[r] = u.h[r];
    // Tile b's rank rows of 16 values: contiguous from bt + tile[b], 16 values per rank row.
    const int64_t tile0 = lora_bt_index(u.rank, 0, o);
    __m512 acc[NB][R];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[b][r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < u.rank; ++j) {
        __m512 hv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) hv[r] = _mm512_set1_ps(h[r][j]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
            const int64_t at = tile0 + (b * u.rank + j) * kLoraBtTile;
            const __m512 bv = whole ? load16<E>(u.bt, at) : load16<E>(u.bt, at, m[b]);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) acc[b][r] = _mm512_fmadd_ps(hv[r], bv, acc[b][r]);
        }
    }
    const __m512 scale = _mm512_set1_ps(u.scale);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            float* y = u.y[r] + o + 16 * b;
            _mm512_mask_storeu_ps(y, m[b], _mm512_fmadd_ps(scale, acc[b][r], _mm512_maskz_loadu_ps(m[b], y)));
        }
}

template <LoraElem E, int R>
void up_transposed(const LoraUp& u) {
    constexpr int NB = R == 1 ? 4 : 2;
    for (int64_t o = u.o0; o < u.o1; o += 16 * NB) up_transposed_blocks<E, R, NB>(u, o);
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

// Element i of the result: the sum of v[i]'s 16 values, always by the same tree.
__attribute__((always_inline)) inline __m512 sums16(const __m512 (&v)[16]) {
    __m512 u[8], w[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
        u[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)  // per lane: the lane's sums of v[4i .. 4i+3]
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    const __m512 x0 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
    const __m512 x1 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], 0x88), _mm512_shuffle_f32x4(w[2], w[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(x0, x1, 0xDD));
}

void up_block(const LoraUp& u, int64_t o, int64_t n) {
    const int64_t rank = u.rank, full = rank / 16 * 16;
    const __mmask16 rank_tail = tail_mask(rank - full);
    const __mmask16 out_mask = n == 16 ? __mmask16(0xffff) : tail_mask(n);
    const __m512 scale = _mm512_set1_ps(u.scale);
    // B's rows for the 16 outputs; past the end, the last one again (its sum is not stored).
    const float* b[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) b[i] = u.b + (o + (i < n ? i : n - 1)) * rank;
    for (int r = 0; r < u.n_rows; ++r) {
        const float* h = u.h[r];
        __m512 acc[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
        int64_t c = 0;
        for (; c < full; c += 16) {
            const __m512 hv = _mm512_loadu_ps(h + c);
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(b[i] + c), hv, acc[i]);
        }
        if (c < rank) {
            const __m512 hv = _mm512_maskz_loadu_ps(rank_tail, h + c);
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(rank_tail, b[i] + c), hv, acc[i]);
        }
        const __m512 y = _mm512_maskz_loadu_ps(out_mask, u.y[r] + o);
        _mm512_mask_storeu_ps(u.y[r] + o, out_mask, _mm512_fmadd_ps(scale, sums16(acc), y));
    }
}

}  // namespace

void lora_down_avx512(const LoraDown& d) {
    switch (d.elem) {
        case LoraElem::f32: return down_rows<LoraElem::f32>(d);
        case LoraElem::f16: return down_rows<LoraElem::f16>(d);
        case LoraElem::bf16: return down_rows<LoraElem::bf16>(d);
    }
}

void lora_up_avx512(const LoraUp& u) {
    if (u.bt) {
        switch (u.elem) {
            case LoraElem::f32: return up_transposed_rows<LoraElem::f32>(u);
            case LoraElem::f16: return up_transposed_rows<LoraElem::f16>(u);
            case LoraElem::bf16: return up_transposed_rows<LoraElem::bf16>(u);
        }
    }
    for (int64_t o = u.o0; o < u.o1; o += 16) up_block(u, o, std::min<int64_t>(16, u.o1 - o));
}

}  // namespace pagoda::backend::cpu
