// Internal: the attention walk's primitive operations (attention_walk_tiles.h, the Ops contract)
// written once over a traits type S, instantiated in attention_avx2.cpp (simd::Avx2) and
// attention_avx512.cpp (simd::Avx512, which adds the two-head scores), each S adding what is its own:
//   sum_each(a)    lane k = the sum of a[k]'s L lanes, in hsum's pairs (the scores of L keys at once)
//   kAccChunks     L-float accumulator chunks per head held in registers by accumulate
//   kConvertChunks chunks of a row convert loads before it stores them (where d is a multiple)
//   row_scales(rows, d)  the q8 scales of L rows as one vector
// Rows are widened in registers (f16, bf16 exactly; q8 codes sign-extended and converted); row
// elements past d read as zero (S::load_*_n). Scores: L keys at a time, one FMA chain per key over
// the row's L-element chunks in order (padded_dim(d) / L of them), then sum_each; a q8 row's dot is
// scaled by its row's scale, then by the softmax scale. P.V: up to 4 heads share each V row, each
// accumulator element summing the rows in order (so no grouping changes a bit). exp_sum uses
// S::exp_nonpositive. Include only from the ISA files (their flags); internal linkage.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/attention/attention_walk.h"

namespace pagoda::backend::cpu::attention_detail {
namespace {

// A q8 row's scale, after its d codes padded to 4 bytes: kv::q8_scale_offset, restated here because
// a shared inline function must not be compiled with an ISA file's flags.
inline float q8_scale(const uint8_t* row, int d) {
    float f;
    std::memcpy(&f, row + (size_t(d) + 3) / 4 * 4, 4);
    return f;
}

template <class S>
struct SimdOps {
    using V = typename S::V;
    static constexpr int L = S::L;

    // Elements i .. i + L - 1 of a row widened to f32; load_row_n: the first n of them, the rest zero.
    template <kv::KvDtype DT>
    [[gnu::always_inline]] static V load_row(const uint8_t* row, int i) {
        if constexpr (DT == kv::KvDtype::f32) return S::load(reinterpret_cast<const float*>(row) + i);
        else if constexpr (DT == kv::KvDtype::q8) return S::load_i8(reinterpret_cast<const int8_t*>(row) + i);
        else if constexpr (DT == kv::KvDtype::f16) return S::load_f16(reinterpret_cast<const uint16_t*>(row) + i);
        else return S::load_bf16(reinterpret_cast<const uint16_t*>(row) + i);
    }
    template <kv::KvDtype DT>
    [[gnu::always_inline]] static V load_row_n(const uint8_t* row, int i, int n) {
        if constexpr (DT == kv::KvDtype::f32) return S::load_n(reinterpret_cast<const float*>(row) + i, n);
        else if constexpr (DT == kv::KvDtype::q8) return S::load_i8_n(reinterpret_cast<const int8_t*>(row) + i, n);
        else if constexpr (DT == kv::KvDtype::f16) return S::load_f16_n(reinterpret_cast<const uint16_t*>(row) + i, n);
        else return S::load_bf16_n(reinterpret_cast<const uint16_t*>(row) + i, n);
    }
    // Chunk i of a row of d: whole, or its part below d (none past d).
    template <kv::KvDtype DT>
    [[gnu::always_inline]] static V load_chunk(const uint8_t* row, int i, int d) {
        return i + L <= d ? load_row<DT>(row, i) : load_row_n<DT>(row, i, i < d ? d - i : 0);
    }

    // Scores of L key rows: one FMA chain per key over the row's L-element chunks in order, then
    // sum_each. Full: d is NV whole chunks.
    template <kv::KvDtype DT, int NV, bool Full>
    [[gnu::always_inline]] static V scores_block(const float* q, const uint8_t* const* rows, int nv, int d) {
        if constexpr (NV > 0) nv = NV;
        V a[L];
#pragma GCC unroll 16
        for (int r = 0; r < L; ++r) a[r] = S::zero();
#pragma GCC unroll 16
        for (int v = 0; v < nv; ++v) {
            const V qv = S::load(q + L * v);
#pragma GCC unroll 16
            for (int r = 0; r < L; ++r)
                a[r] = S::fma(qv, Full ? load_row<DT>(rows[r], L * v) : load_chunk<DT>(rows[r], L * v, d), a[r]);
        }
        return S::sum_each(a);
    }

    // acc[h][c] += p[h][j] * v[j][c] for j in order, for H heads and CW L-float chunks from chunk c0
    // (Full: all inside d); with row scales rs_of (Scaled: f32 rows holding q8 codes), the weight is
    // p[h][j] * rs_of[j], as a q8 row's own.
    template <kv::KvDtype DT, int H, int CW, bool Scaled, bool Full>
    static void accumulate_block(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d, int c0,
                                 const float* rs_of) {
        V a[H][CW];
#pragma GCC unroll 16
        for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
            for (int c = 0; c < CW; ++c) a[h][c] = S::load(acc[h] + L * (c0 + c));
        for (int j = 0; j < n; ++j) {
            V vv[CW];
#pragma GCC unroll 16
            for (int c = 0; c < CW; ++c)
                vv[c] = Full ? load_row<DT>(rows[j], L * (c0 + c)) : load_chunk<DT>(rows[j], L * (c0 + c), d);
            const float rs = DT == kv::KvDtype::q8 ? q8_scale(rows[j], d) : Scaled ? rs_of[j] : 1.0f;
#pragma GCC unroll 16
            for (int h = 0; h < H; ++h) {
                const V pv = S::set1(DT == kv::KvDtype::q8 || Scaled ? p[h][j] * rs : p[h][j]);
#pragma GCC unroll 16
                for (int c = 0; c < CW; ++c) a[h][c] = S::fma(pv, vv[c], a[h][c]);
            }
        }
#pragma GCC unroll 16
        for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
            for (int c = 0; c < CW; ++c) S::store(acc[h] + L * (c0 + c), a[h][c]);
    }
    template <kv::KvDtype DT, int H, int CW, bool Scaled>
    static void accumulate_chunks(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d, int c0,
                                  const float* rs_of) {
        if (L * (c0 + CW) <= d) accumulate_block<DT, H, CW, Scaled, true>(acc, p, rows, n, d, c0, rs_of);
        else accumulate_block<DT, H, CW, Scaled, false>(acc, p, rows, n, d, c0, rs_of);
    }
    template <kv::KvDtype DT, int H, bool Scaled = false>
    static void accumulate_heads(float* const* acc, const float* const* p, const uint8_t* const* rows, int n, int d,
                                 const float* rs_of = nullptr) {
        constexpr int CW = S::kAccChunks;
        static_assert(CW >= 1 && CW <= 4, "accumulate's blocks are 1 to 4 chunks");
        const int nv = padded_dim(d) / L;
        int c0 = 0;
        for (; c0 + CW <= nv; c0 += CW) accumulate_chunks<DT, H, CW, Scaled>(acc, p, rows, n, d, c0, rs_of);
        const int rest = nv - c0;  // < CW chunks left: one block of them
        if constexpr (CW > 3)
            if (rest == 3) return accumulate_chunks<DT, H, 3, Scaled>(acc, p, rows, n, d, c0, rs_of);
        if constexpr (CW > 2)
            if (rest == 2) return accumulate_chunks<DT, H, 2, Scaled>(acc, p, rows, n, d, c0, rs_of);
        if (rest == 1) accumulate_chunks<DT, H, 1, Scaled>(acc, p, rows, n, d, c0, rs_of);
    }

    template <kv::KvDtype DT>
    static void convert(const uint8_t* const* rows, int n, int d, int ld, float* dst) {
        constexpr int G = S::kConvertChunks;
        if (d % (G * L) == 0) {  // whole chunks: the rows' loads issued together, G chunks at a time
            for (int r = 0; r < n; ++r)
                for (int i = 0; i < d; i += G * L) {
                    V c[G];
#pragma GCC unroll 4
                    for (int k = 0; k < G; ++k) c[k] = load_row<DT>(rows[r], i + L * k);
#pragma GCC unroll 4
                    for (int k = 0; k < G; ++k) S::store(dst + size_t(r) * ld + i + L * k, c[k]);
                }
            return;
        }
        for (int r = 0; r < n; ++r)  // chunks past d load as zeros: the padding
            for (int i = 0; i < ld; i += L) S::store(dst + size_t(r) * ld + i, load_chunk<DT>(rows[r], i, d));
    }
    // s[j] for j < n rounded up to L.
    template <kv::KvDtype DT>
    static void scores(const float* q, const uint8_t* const* rows, int n, int d, float scale, float* s,
                       const float* rs_of = nullptr) {
        const V sv = S::set1(scale);
        for (int j = 0; j < n; j += L) {
            V r;
            if (d == 64) r = scores_block<DT, 64 / L, true>(q, rows + j, 0, d);
            else if (d == 128) r = scores_block<DT, 128 / L, true>(q, rows + j, 0, d);
            else r = scores_block<DT, 0, false>(q, rows + j, padded_dim(d) / L, d);
            if (rs_of) r = S::mul(r, S::load(rs_of + j));  // widened q8 codes: as below
            if constexpr (DT == kv::KvDtype::q8) r = S::mul(r, S::row_scales(rows + j, d));
            S::store(s + j, S::mul(r, sv));
        }
    }
    template <kv::KvDtype DT>
    static void accumulate(float* const* acc, const float* const* p, int heads, const uint8_t* const* rows, int n, int d) {
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
        const V cv = S::set1(c);
        for (int i = 0; i < d; i += L) S::store(acc + i, S::mul(S::load(acc + i), cv));
    }
    static float max(const float* s, int n) {
        constexpr float kLow = -std::numeric_limits<float>::infinity();
        V mx = S::set1(kLow);
        int j = 0;
        for (; j + L <= n; j += L) mx = S::max(mx, S::load(s + j));
        if (j < n) mx = S::max(mx, S::load_n(s + j, n - j, kLow));
        return S::hmax(mx);
    }
    static float exp_sum(float* s, int n, float m) {
        const V mv = S::set1(m);
        V sum = S::zero();
        int j = 0;
        for (; j + L <= n; j += L) {
            const V e = S::exp_nonpositive(S::sub(S::load(s + j), mv));
            S::store(s + j, e);
            sum = S::add(sum, e);
        }
        if (j < n) {  // the lanes past n add exactly zero
            const V e = S::first_n(S::exp_nonpositive(S::sub(S::load_n(s + j, n - j), mv)), n - j);
            S::store_n(s + j, e, n - j);
            sum = S::add(sum, e);
        }
        return S::hsum(sum);
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::attention_detail
