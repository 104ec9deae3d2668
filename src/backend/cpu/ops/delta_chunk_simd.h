// Internal: delta_chunk.h's chunk of the gated delta rule written once over a traits type S
// (simd::Avx512, simd::Avx2, or recurrent_scalar.cpp's one-lane type): load, store, load_n,
// store_n, set1, zero, mul, fma (c + a * b), fnma (c - a * b), exp. Internal linkage: each ISA file
// compiles its own copy with its own flags.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/ops/delta_chunk.h"

namespace pagoda::backend::cpu::detail {
namespace {

// R rows x NV vectors of Y = (accumulate ? Y : 0) + X B, the last vector `last` lanes wide (Partial)
// or whole; the accumulators stay in registers over the whole K loop (the loops over them unrolled).
template <class S, int R, int NV, bool Partial>
void gemm_tile(const float* x, int64_t ldx, int64_t kdim, const float* b, int64_t ldb, float* y, int64_t ldy,
               int last, bool accumulate) {
    using V = typename S::V;
    auto load = [&](const float* p, int v) { return Partial && v == NV - 1 ? S::load_n(p, last) : S::load(p); };
    V acc[R][NV];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load(y + r * ldy + v * S::L, v) : S::zero();
    for (int64_t kk = 0; kk < kdim; ++kk) {
        V bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) bv[v] = load(b + kk * ldb + v * S::L, v);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const V xr = S::set1(x[r * ldx + kk]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[r][v] = S::fma(xr, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
            float* p = y + r * ldy + v * S::L;
            if (Partial && v == NV - 1)
                S::store_n(p, acc[r][v], last);
            else
                S::store(p, acc[r][v]);
        }
}

template <class S, int R, int NV>
void gemm_tile(const float* x, int64_t ldx, int64_t kdim, const float* b, int64_t ldb, float* y, int64_t ldy,
               int last, bool accumulate) {
    if (last < S::L)
        gemm_tile<S, R, NV, true>(x, ldx, kdim, b, ldb, y, ldy, last, accumulate);
    else
        gemm_tile<S, R, NV, false>(x, ldx, kdim, b, ldb, y, ldy, last, accumulate);
}

template <class S, int R>
void gemm_rows(const float* x, int64_t ldx, int64_t kdim, const float* b, int64_t ldb, int64_t cols, float* y,
               int64_t ldy, bool accumulate) {
    // 4 vectors a tile where the registers hold 16 accumulators and the loads beside them (AVX-512's
    // 32), 2 on AVX2's 16.
    constexpr int kMaxVectors = S::L >= 16 ? 4 : 2;
    constexpr int64_t block = kMaxVectors * S::L;
    for (int64_t c = 0; c < cols; c += block) {
        const int64_t width = std::min(block, cols - c);
        const int vectors = int((width + S::L - 1) / S::L), last = int(width - (vectors - 1) * S::L);
        float* yc = y + c;
        const float* bc = b + c;
        switch (vectors) {
            case 1: gemm_tile<S, R, 1>(x, ldx, kdim, bc, ldb, yc, ldy, last, accumulate); break;
            case 2: gemm_tile<S, R, 2>(x, ldx, kdim, bc, ldb, yc, ldy, last, accumulate); break;
            case 3: gemm_tile<S, R, kMaxVectors < 3 ? 1 : 3>(x, ldx, kdim, bc, ldb, yc, ldy, last, accumulate); break;
            default: gemm_tile<S, R, kMaxVectors>(x, ldx, kdim, bc, ldb, yc, ldy, last, accumulate); break;
        }
    }
}

// Which part of y a product needs: all of it, only the lower triangle with its diagonal (y[r][c],
// c <= r: the columns past a row block's last row are skipped), or all of y from a lower-triangular
// x (x[r][k] = 0 for k > r: the sum over k stops at a row block's last row).
enum class Part { all, lower_y, lower_x };

// y (rows x cols) = (accumulate ? y : 0) + x (rows x kdim) b (kdim x cols), row-major with strides.
template <class S>
void gemm(const float* x, int64_t ldx, int64_t rows, int64_t kdim, const float* b, int64_t ldb, int64_t cols,
          float* y, int64_t ldy, bool accumulate, Part part = Part::all) {
    for (int64_t r = 0; r < rows; r += 4) {
        const int64_t n = std::min<int64_t>(4, rows - r);
        const int64_t c = part == Part::lower_y ? std::min(cols, r + n) : cols;
        const int64_t k = part == Part::lower_x ? std::min(kdim, r + n) : kdim;
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        switch (n) {
            case 4: gemm_rows<S, 4>(xr, ldx, k, b, ldb, c, yr, ldy, accumulate); break;
            case 3: gemm_rows<S, 3>(xr, ldx, k, b, ldb, c, yr, ldy, accumulate); break;
            case 2: gemm_rows<S, 2>(xr, ldx, k, b, ldb, c, yr, ldy, accumulate); break;
            default: gemm_rows<S, 1>(xr, ldx, k, b, ldb, c, yr, ldy, accumulate); break;
        }
    }
}

// NV vectors of combine_rows, the last `last` lanes wide (Partial) or whole: one accumulator per
// vector, so the count terms run as NV independent chains.
template <class S, int NV, bool Partial>
void combine_tile(const float* base, float scale, const float* coef, const float* rows, int64_t ld, int64_t count,
                  int last, float* y) {
    using V = typename S::V;
    auto load = [&](const float* p, int v) { return Partial && v == NV - 1 ? S::load_n(p, last) : S::load(p); };
    V acc[NV];
    const V sc = S::set1(scale);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[v] = S::mul(load(base + v * S::L, v), sc);
    for (int64_t s = 0; s < count; ++s) {
        const V cs = S::set1(coef[s]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[v] = S::fnma(cs, load(rows + s * ld + v * S::L, v), acc[v]);
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
        if (Partial && v == NV - 1)
            S::store_n(y + v * S::L, acc[v], last);
        else
            S::store(y + v * S::L, acc[v]);
    }
}

template <class S, int NV>
void combine_tile(const float* base, float scale, const float* coef, const float* rows, int64_t ld, int64_t count,
                  int last, float* y) {
    if (last < S::L)
        combine_tile<S, NV, true>(base, scale, coef, rows, ld, count, last, y);
    else
        combine_tile<S, NV, false>(base, scale, coef, rows, ld, count, last, y);
}

// y[0..n) = base[0..n) * scale - sum_s coef[s] * rows[s][0..n), s < count (rows `ld` apart); y may
// be base.
template <class S>
void combine_rows(const float* base, float scale, const float* coef, const float* rows, int64_t ld, int64_t count,
                  int64_t n, float* y) {
    constexpr int64_t block = 4 * S::L;
    for (int64_t c = 0; c < n; c += block) {
        const int64_t width = std::min(block, n - c);
        const int vectors = int((width + S::L - 1) / S::L), last = int(width - (vectors - 1) * S::L);
        const float* rc = rows == nullptr ? nullptr : rows + c;
        switch (vectors) {
            case 1: combine_tile<S, 1>(base + c, scale, coef, rc, ld, count, last, y + c); break;
            case 2: combine_tile<S, 2>(base + c, scale, coef, rc, ld, count, last, y + c); break;
            case 3: combine_tile<S, 3>(base + c, scale, coef, rc, ld, count, last, y + c); break;
            default: combine_tile<S, 4>(base + c, scale, coef, rc, ld, count, last, y + c); break;
        }
    }
}

// out[0..n) = exp(in[0..n)).
template <class S>
void exp_row(const float* in, int64_t n, float* out) {
    for (int64_t c = 0; c < n; c += S::L) {
        const int w = int(std::min<int64_t>(S::L, n - c));
        if (w < S::L)
            S::store_n(out + c, S::exp(S::load_n(in + c, w)), w);
        else
            S::store(out + c, S::exp(S::load(in + c)));
    }
}

template <class S>
void delta_chunk_t(const DeltaChunk& c) {
    const int64_t n = c.n, d = c.d;
    thread_local std::vector<float> buf;  // grows once to the largest head size, then is reused
    buf.resize(size_t(d * n + 2 * n * n + 3 * n * d + 4 * n));
    float* kt = buf.data();   // d x n: the keys transposed
    float* kk = kt + d * n;   // n x n: k_t.k_s, then the substitution's coefficients
    float* qk = kk + n * n;   // n x n: q_t.k_s, then times the decays (zero above the diagonal)
    float* ks = qk + n * n;   // n x d: S_0^T k_t
    float* qs = ks + n * d;   // n x d: S_0^T q_t
    float* dd = qs + n * d;   // n x d: the new values d_t
    float* gam = dd + n * d;  // e^{G_t}
    float* tail = gam + n;    // e^{G_n - G_t}
    float* diff = tail + n;   // one row's G_t - G_s
    float* dec = diff + n;    // one row's e^{G_t - G_s}

    // The running log decay in double: its differences stay exact to float however long the sum.
    double sums[kDeltaChunk];
    double run = 0;
    for (int64_t t = 0; t < n; ++t) sums[t] = run += double(c.g[t]);
    for (int64_t t = 0; t < n; ++t) {
        gam[t] = float(std::exp(sums[t]));
        tail[t] = float(std::exp(sums[n - 1] - sums[t]));
    }
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < d; ++i) kt[i * n + t] = c.k[t * d + i];

    gemm<S>(c.k, d, n, d, kt, n, n, kk, n, false, Part::lower_y);
    gemm<S>(c.q, d, n, d, kt, n, n, qk, n, false, Part::lower_y);
    gemm<S>(c.k, d, n, d, c.state, d, d, ks, d, false);
    gemm<S>(c.q, d, n, d, c.state, d, d, qs, d, false);

    for (int64_t t = 0; t < n; ++t) {
        for (int64_t s = 0; s <= t; ++s) diff[s] = float(sums[t] - sums[s]);
        exp_row<S>(diff, t + 1, dec);
        const float b = c.beta[t];
        for (int64_t s = 0; s < t; ++s) kk[t * n + s] *= b * dec[s];
        for (int64_t s = 0; s <= t; ++s) qk[t * n + s] *= dec[s];
        for (int64_t s = t + 1; s < n; ++s) qk[t * n + s] = 0.0f;
        // d_t = beta_t v_t - beta_t e^{G_t} S_0^T k_t - sum_{s<t} coef_ts d_s (d_s solved already).
        const float bg = b * gam[t];
        combine_rows<S>(c.v + t * d, b, &bg, ks + t * d, d, 1, d, dd + t * d);
        combine_rows<S>(dd + t * d, 1.0f, kk + t * n, dd, d, t, d, dd + t * d);
    }
    // out_t = e^{G_t} S_0^T q_t + sum_{s<=t} e^{G_t - G_s} (q_t.k_s) d_s
    for (int64_t t = 0; t < n; ++t) combine_rows<S>(qs + t * d, gam[t], nullptr, nullptr, 0, 0, d, c.out + t * d);
    gemm<S>(qk, n, n, n, dd, d, d, c.out, d, true, Part::lower_x);
    // S = e^{G_n} S_0 + sum_s (e^{G_n - G_s} k_s) d_s^T: kt scaled by the tails, times dd.
    for (int64_t i = 0; i < d; ++i) {
        for (int64_t t = 0; t < n; ++t) kt[i * n + t] *= tail[t];
        combine_rows<S>(c.state + i * d, gam[n - 1], nullptr, nullptr, 0, 0, d, c.state + i * d);
    }
    gemm<S>(kt, n, d, n, dd, d, d, c.state, d, true);
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
