// Internal: the LoRA row kernels (lora_kernels.h) written once over a traits type S, instantiated in
// lora_add_avx2.cpp (simd::Avx2) and lora_add_avx512.cpp (simd::Avx512), each adding what is its own:
//   down_rank_rows(R)  rank rows side by side for R rows (what the register file holds)
//   sum_each(v)        lane i = the sum of v[i]'s L lanes, in that ISA's fixed tree
// down: two accumulators per row and rank row (even and odd L-value chunks of A's row, the tail
// zero-padded into the one whose turn it is), added, then S::hsum; J rank rows side by side (each x
// chunk loaded once for J of them, the FMA chains overlapping). up from B^T (its 16-output tiles):
// one accumulator per row and L outputs, FMAs over the rank in order, 2 or 4 blocks of L outputs
// side by side. up from B: per block of L outputs one accumulator each over B's row and h in
// L-value chunks (the tail zero-padded), reduced by sum_each. Then y = scale * sums + y (fused).
// Side by side changes no value's order of operations. f16 / bf16 widen exactly (S::load_f16 /
// load_bf16). Include only from the ISA files (their flags); internal linkage.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cpu/lora/lora_kernels.h"

namespace pagoda::backend::cpu::lora_simd {
namespace {

// L values of element type E from p + i (n < L: the first n, the rest zero).
template <class S, LoraElem E>
inline typename S::V load(const void* p, int64_t i) {
    if constexpr (E == LoraElem::f32) return S::load(static_cast<const float*>(p) + i);
    else if constexpr (E == LoraElem::f16) return S::load_f16(static_cast<const uint16_t*>(p) + i);
    else return S::load_bf16(static_cast<const uint16_t*>(p) + i);
}
template <class S, LoraElem E>
inline typename S::V load_n(const void* p, int64_t i, int n) {
    if constexpr (E == LoraElem::f32) return S::load_n(static_cast<const float*>(p) + i, n);
    else if constexpr (E == LoraElem::f16) return S::load_f16_n(static_cast<const uint16_t*>(p) + i, n);
    else return S::load_bf16_n(static_cast<const uint16_t*>(p) + i, n);
}

// One L-value chunk of J rank rows against R rows into `acc` (Tail: the first n values, zero-padded).
// Every loop is unrolled (the project builds at -O2): the accumulators must stay in registers; a
// loop over them left rolled keeps them on the stack, a store and a reload per FMA.
template <class S, LoraElem E, int R, int J, bool Tail>
__attribute__((always_inline)) inline void down_chunk(typename S::V (&acc)[J][R], const void* a, int64_t a0, int64_t in,
                                                      const float* const (&x)[R], int64_t c, int n) {
    typename S::V xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = Tail ? S::load_n(x[r] + c, n) : S::load(x[r] + c);
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q) {
        const typename S::V av = Tail ? load_n<S, E>(a, a0 + q * in + c, n) : load<S, E>(a, a0 + q * in + c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[q][r] = S::fma(av, xv[r], acc[q][r]);
    }
}

// J rank rows from j, each with its own two accumulators per row (even and odd chunks: its sum is
// what it is alone).
template <class S, LoraElem E, int R, int J>
void down_j(const LoraDown& d, int64_t j) {
    constexpr int L = S::L;
    const int64_t in = d.in, full = in / L * L, a0 = j * in;
    const float* x[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) x[r] = d.x[r];
    typename S::V even[J][R], odd[J][R];
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) even[q][r] = odd[q][r] = S::zero();
    int64_t c = 0;
    for (; c + 2 * L <= full; c += 2 * L) {
        down_chunk<S, E, R, J, false>(even, d.a, a0, in, x, c, L);
        down_chunk<S, E, R, J, false>(odd, d.a, a0, in, x, c + L, L);
    }
    bool odd_turn = false;  // whose turn the next chunk is
    if (c < full) {
        down_chunk<S, E, R, J, false>(even, d.a, a0, in, x, c, L);
        c += L;
        odd_turn = true;
    }
    if (c < in) {
        if (odd_turn) down_chunk<S, E, R, J, true>(odd, d.a, a0, in, x, c, int(in - c));
        else down_chunk<S, E, R, J, true>(even, d.a, a0, in, x, c, int(in - c));
    }
#pragma GCC unroll 4
    for (int q = 0; q < J; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) d.h[r][j + q] = S::hsum(S::add(even[q][r], odd[q][r]));
}

template <class S, LoraElem E, int R>
void down(const LoraDown& d) {
    constexpr int J = S::down_rank_rows(R);
    int64_t j = d.j0;
    for (; j + J <= d.j1; j += J) down_j<S, E, R, J>(d, j);
    for (; j < d.j1; ++j) down_j<S, E, R, 1>(d, j);
}

template <class S, LoraElem E>
void down_rows(const LoraDown& d) {
    switch (d.n_rows) {
        case 1: return down<S, E, 1>(d);
        case 2: return down<S, E, 2>(d);
        case 3: return down<S, E, 3>(d);
        default: return down<S, E, 4>(d);
    }
}

// From B^T: NB blocks of L outputs from o side by side (independent FMA chains: one block per row
// would leave the FMA latency exposed), each row's accumulator per block summing over the rank in
// order. A tile's padding is zero and in bounds, so a block past o1 in part reads whole vectors;
// Whole: all NB blocks lie below o1.
template <class S, LoraElem E, int R, int NB, bool Whole>
void up_transposed_blocks(const LoraUp& u, int64_t o) {
    constexpr int L = S::L;
    using V = typename S::V;
    int n[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) n[b] = Whole ? L : int(std::clamp<int64_t>(u.o1 - (o + L * b), 0, L));
    const float* h[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) h[r] = u.h[r];
    V acc[NB][R];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[b][r] = S::zero();
    for (int64_t j = 0; j < u.rank; ++j) {
        V hv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) hv[r] = S::set1(h[r][j]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
            if (!Whole && n[b] == 0) continue;
            const V bv = load<S, E>(u.bt, lora_bt_index(u.rank, j, o + L * b));
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) acc[b][r] = S::fma(hv[r], bv, acc[b][r]);
        }
    }
    const V scale = S::set1(u.scale);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            float* y = u.y[r] + o + L * b;
            if (Whole || n[b] == L) S::store(y, S::fma(scale, acc[b][r], S::load(y)));
            else if (n[b] > 0) S::store_n(y, S::fma(scale, acc[b][r], S::load_n(y, n[b])), n[b]);
        }
}

template <class S, LoraElem E, int R>
void up_transposed(const LoraUp& u) {
    constexpr int NB = R == 1 ? 4 : 2, step = S::L * NB;
    static_assert(kLoraBtTile % S::L == 0, "a block of L outputs lies in one B^T tile");
    int64_t o = u.o0;
    for (; o + step <= u.o1; o += step) up_transposed_blocks<S, E, R, NB, true>(u, o);
    if (o < u.o1) up_transposed_blocks<S, E, R, NB, false>(u, o);
}

template <class S, LoraElem E>
void up_transposed_rows(const LoraUp& u) {
    switch (u.n_rows) {
        case 1: return up_transposed<S, E, 1>(u);
        case 2: return up_transposed<S, E, 2>(u);
        case 3: return up_transposed<S, E, 3>(u);
        default: return up_transposed<S, E, 4>(u);
    }
}

// From B (f32, out x rank): the n <= L outputs from o, one accumulator each over B's row and h in
// L-value chunks in order (the rank tail zero-padded), reduced by S::sum_each.
template <class S>
void up_block(const LoraUp& u, int64_t o, int n) {
    constexpr int L = S::L;
    using V = typename S::V;
    const int64_t rank = u.rank, full = rank / L * L;
    const int tail = int(rank - full);
    const V scale = S::set1(u.scale);
    // B's rows for the L outputs; past the end, the last one again (its sum is not stored).
    const float* b[L];
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i) b[i] = u.b + (o + (i < n ? i : n - 1)) * rank;
    for (int r = 0; r < u.n_rows; ++r) {
        const float* h = u.h[r];
        V acc[L];
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) acc[i] = S::zero();
        int64_t c = 0;
        for (; c < full; c += L) {
            const V hv = S::load(h + c);
#pragma GCC unroll 16
            for (int i = 0; i < L; ++i) acc[i] = S::fma(S::load(b[i] + c), hv, acc[i]);
        }
        if (tail > 0) {
            const V hv = S::load_n(h + c, tail);
#pragma GCC unroll 16
            for (int i = 0; i < L; ++i) acc[i] = S::fma(S::load_n(b[i] + c, tail), hv, acc[i]);
        }
        float* y = u.y[r] + o;
        if (n == L) S::store(y, S::fma(scale, S::sum_each(acc), S::load(y)));
        else S::store_n(y, S::fma(scale, S::sum_each(acc), S::load_n(y, n)), n);
    }
}

template <class S>
void down_any(const LoraDown& d) {
    switch (d.elem) {
        case LoraElem::f32: return down_rows<S, LoraElem::f32>(d);
        case LoraElem::f16: return down_rows<S, LoraElem::f16>(d);
        case LoraElem::bf16: return down_rows<S, LoraElem::bf16>(d);
    }
}

template <class S>
void up_any(const LoraUp& u) {
    if (u.bt) {
        switch (u.elem) {
            case LoraElem::f32: return up_transposed_rows<S, LoraElem::f32>(u);
            case LoraElem::f16: return up_transposed_rows<S, LoraElem::f16>(u);
            case LoraElem::bf16: return up_transposed_rows<S, LoraElem::bf16>(u);
        }
    }
    for (int64_t o = u.o0; o < u.o1; o += S::L) up_block<S>(u, o, int(std::min<int64_t>(S::L, u.o1 - o)));
}

}  // namespace
}  // namespace pagoda::backend::cpu::lora_simd
