// Internal: the f32 GEMM/GEMV written once over a SIMD traits type S and included by matmul_scalar.cpp,
// matmul_avx2.cpp and matmul_avx512.cpp (each compiled with its own ISA flags; everything here has
// internal linkage so the instantiations never mix). S: simd/{scalar,avx2,avx512}.h's traits plus R, T
// and sum_rows (matmul_*.cpp); it provides:
//   V, L (lanes), R x T (row x token register block), zero(), load(const float*), fma(a, b, c),
//   load_f16(const uint16_t*), load_bf16(const uint16_t*), hsum(V) (a fixed tree), and optionally
//   sum_rows(const V* v, float* out): out[r] = hsum(v[r]) for the R vectors, bitwise (the same tree
//   done for R rows at once with shuffles across them; hsum per row is the fallback).
// Order of operations: see matmul_paths.h. A task owns mc rows; for each group of nc tokens (rounded
// up to whole token blocks) it walks K in kc tiles and runs the R x T micro-kernel over every (row
// block, token block) of the tile, token blocks outermost where T > R (see run_rows). The
// first tile starts its lanes at zero in registers, a middle tile keeps them in a per-thread scratch,
// and the last tile sums them in registers and stores the outputs: with K <= kc (decode, and most
// prefill matrices) the lanes never leave the registers.
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul/matmul_paths.h"
#include "quant/dequantize.h"

namespace pagoda::backend::cpu::detail {
namespace {

enum class Elem { f32, f16, bf16 };

template <class S, Elem E>
inline typename S::V load_w(const void* p, int64_t k) {
    if constexpr (E == Elem::f32) return S::load(static_cast<const float*>(p) + k);
    else if constexpr (E == Elem::f16) return S::load_f16(static_cast<const uint16_t*>(p) + k);
    else return S::load_bf16(static_cast<const uint16_t*>(p) + k);
}

// Final partial step: the missing elements read as zero on both sides.
template <class S, Elem E>
inline typename S::V load_w_tail(const void* p, int64_t k, int64_t count) {
    if constexpr (E == Elem::f32) {
        alignas(64) float buf[S::L] = {};
        std::memcpy(buf, static_cast<const float*>(p) + k, size_t(count) * 4);
        return S::load(buf);
    } else {
        alignas(64) uint16_t buf[S::L] = {};
        std::memcpy(buf, static_cast<const uint16_t*>(p) + k, size_t(count) * 2);
        return E == Elem::f16 ? S::load_f16(buf) : S::load_bf16(buf);
    }
}

template <class S>
inline typename S::V load_x_tail(const float* p, int64_t count) {
    alignas(64) float buf[S::L] = {};
    std::memcpy(buf, p, size_t(count) * 4);
    return S::load(buf);
}

// Where a micro-kernel call's lane vectors come from and go: `first` starts them at zero (else they
// are loaded from acc), `last` sums each (token, row) and stores rows_valid outputs of token t at
// y + t * y_stride (else they are stored back to acc).
struct TileEnds {
    bool first, last;
    float* y;
    int64_t y_stride;
    int rows_valid;
};

template <class S>
concept HasSumRows = requires(const typename S::V* v, float* out) { S::sum_rows(v, out); };

// out[r] = S::hsum(v[r]) for r < count (count <= R).
template <class S>
inline void store_row_sums(const typename S::V* v, float* out, int count) {
    if constexpr (HasSumRows<S>) {
        if (count == S::R) return S::sum_rows(v, out);
        float sums[S::R];
        S::sum_rows(v, sums);
        for (int r = 0; r < count; ++r) out[r] = sums[r];
    } else {
        for (int r = 0; r < count; ++r) out[r] = S::hsum(v[r]);
    }
}

// Lanes of w[r][0..len) * x[t][0..len) for R rows and T tokens, added to the lanes the call starts
// with (TileEnds). One token (decode, weights from memory): each line of w[r] + prefetch_ahead is
// requested as w[r]'s same line is read (0: none); the caller passes the next row block's distance,
// R rows: one call ahead. Not with more tokens: at 4 tokens the requests cost 10-20 % of the kernel
// from cache and gained nothing from memory, and in prefill (first token block of each row block
// only) they were within the noise.
// Not inlined: inlined into run_rows, GCC 12 kept the accumulators in memory as well as in registers
// and stored all 24 of them every step (measured: the F16 GEMM at half speed).
template <class S, Elem E, int T>
__attribute__((noinline)) void micro_kernel(const void* const* w, const float* const* x, int64_t len,
                                            typename S::V* acc, int64_t prefetch_ahead, const TileEnds& ends) {
    using V = typename S::V;
    constexpr int R = S::R;
    V a[T][R];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) a[t][r] = ends.first ? S::zero() : acc[t * R + r];
    int64_t k = 0;
    constexpr int64_t esize = E == Elem::f32 ? 4 : 2;
    for (; k + S::L <= len; k += S::L) {
        V wv[R];
        if constexpr (T == 1 && S::L * esize >= 16) {
            // Decode is memory bound: request each line one call ahead (the same line of the next row
            // block), across the 4 KiB page boundaries that stop the hardware prefetchers; one request
            // per 64-byte line. A fixed 4 KiB within the row (before) fell on rows this call reads at
            // the same time whenever R rows span more than 4 KiB, and left part of the next block
            // unrequested whenever they span less. Steps of 16 bytes too (F16/BF16 on 8 lanes): AVX2
            // F16 decode on Zen 3 gained 20 % from it.
            if (prefetch_ahead > 0 && (k * esize) % 64 == 0)
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    __builtin_prefetch(static_cast<const char*>(w[r]) + k * esize + prefetch_ahead);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) wv[r] = load_w<S, E>(w[r], k);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            V xv = S::load(x[t] + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) a[t][r] = S::fma(wv[r], xv, a[t][r]);
        }
    }
    if (k < len) {
        V wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_w_tail<S, E>(w[r], k, len - k);
        for (int t = 0; t < T; ++t) {
            V xv = load_x_tail<S>(x[t] + k, len - k);
            for (int r = 0; r < R; ++r) a[t][r] = S::fma(wv[r], xv, a[t][r]);
        }
    }
    if (ends.last) {
        // The sums leave from registers: no scratch round trip, and R rows' trees share shuffles.
        // Each token's vectors are copied out by constant indices: passing a[t] itself would take the
        // accumulators' address, and GCC then keeps them on the stack, a store per FMA (measured: the
        // F16 GEMM at half speed).
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            V rows[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) rows[r] = a[t][r];
            store_row_sums<S>(rows, ends.y + t * ends.y_stride, ends.rows_valid);
        }
        return;
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[t * R + r] = a[t][r];
}

template <class S, Elem E, int T>
void micro_dispatch(int tokens, const void* const* w, const float* const* x, int64_t len, typename S::V* acc,
                    int64_t prefetch_ahead, const TileEnds& ends) {
    if constexpr (T > 1) {
        if (tokens < T) return micro_dispatch<S, E, T - 1>(tokens, w, x, len, acc, prefetch_ahead, ends);
    }
    micro_kernel<S, E, T>(w, x, len, acc, prefetch_ahead, ends);
}

struct FloatTask {
    const uint8_t* wdata;
    int64_t row_bytes;
    gguf::GgmlType type;
    int64_t rows, cols;
    const float* x;
    int64_t n_tokens;
    float* y;
    GemmTiles tiles;
};

// Rows [r0, r1) of the task, every token. E is the element type the micro-kernel reads: the weights
// themselves for F32/F16/BF16, or f32 tiles dequantised from a block type (dequant = true).
template <class S, Elem E, bool Dequant>
void run_rows(const FloatTask& a, int64_t r0, int64_t r1) {
    using V = typename S::V;
    constexpr int R = S::R, T = S::T;
    constexpr int64_t esize = E == Elem::f32 ? 4 : 2;
    const int64_t K = a.cols;
    // With a single token block the activations are tiny and K tiling buys no reuse: whole rows then
    // stream contiguously (few long streams suit the hardware prefetcher; many 1-2 KiB pieces do not).
    // Results do not depend on kc (matmul_paths.h).
    const int64_t kc = !Dequant && a.n_tokens <= T ? K : Dequant ? std::max<int64_t>(a.tiles.kc, 256) : a.tiles.kc;
    const int64_t n_rb = (r1 - r0 + R - 1) / R;
    // Weights read in place stream from memory: the next row block is R rows on. Dequantised tiles
    // are in L1 already.
    const int64_t prefetch_ahead = Dequant ? 0 : R * a.row_bytes;
    struct Lanes { V v; };  // wrapper keeps the vector type's alignment inside std::vector
    thread_local std::vector<Lanes> scratch;
    thread_local std::vector<float> tile;  // dequantised rows of one block: [R][kc]
    if (Dequant && tile.size() < size_t(R * kc)) tile.resize(size_t(R * kc));
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += a.tiles.nc) {
        const int64_t nt = std::min(a.tiles.nc, a.n_tokens - t0);
        // Lanes cross K tiles through the scratch only when K needs more than one tile.
        const size_t need = kc < K ? size_t(n_rb * nt * R) : 0;
        if (scratch.size() < need) scratch.resize(need);
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t len = std::min(kc, K - k0);
            const float* xs[T];
            auto weights = [&](int64_t rb, const void** w) {
                const int64_t rbase = r0 + rb * R;
                const int rr = int(std::min<int64_t>(R, r1 - rbase));
                for (int r = 0; r < R; ++r) {
                    // Missing rows of a partial block repeat the first row; their sums are discarded.
                    const int64_t row = rbase + (r < rr ? r : 0);
                    if constexpr (Dequant) {
                        if (r < rr) {
                            const int64_t bs = gguf::type_traits(a.type).block_size;
                            const int64_t bb = gguf::type_traits(a.type).type_size;
                            quant::dequantize_row(a.type, a.wdata + row * a.row_bytes + k0 / bs * bb,
                                                  tile.data() + r * kc, len);
                        }
                        w[r] = tile.data() + (r < rr ? r : 0) * kc;
                    } else {
                        w[r] = a.wdata + row * a.row_bytes + k0 * esize;
                    }
                }
                return rr;
            };
            auto call = [&](int64_t rb, const void* const* w, int rr, int64_t tb) {
                const int tt = int(std::min<int64_t>(T, nt - tb));
                for (int t = 0; t < tt; ++t) xs[t] = a.x + (t0 + tb + t) * K + k0;
                const TileEnds ends{k0 == 0, k0 + len >= K, a.y + (t0 + tb) * a.rows + r0 + rb * R, a.rows, rr};
                micro_dispatch<S, E, T>(tt, w, xs, len, need ? &scratch[size_t((rb * nt + tb) * R)].v : nullptr,
                                        prefetch_ahead, ends);
            };
            // The inner loop walks the operand with fewer vectors per step, so the other stays in L1
            // across it: with more tokens than rows per block (AVX-512: 4 x 6) the T activation rows
            // stay and the R weight rows stream past them (weights from L2 cost the kernel nothing
            // measurable, activations from L2 a fifth); with fewer (AVX2: 4 x 2) the weights stay.
            // A dequantised tile holds one row block, so dequant_fma keeps its rows outermost.
            constexpr bool tokens_outer = S::T > S::R && !Dequant;
            if constexpr (!tokens_outer) {
                for (int64_t rb = 0; rb < n_rb; ++rb) {
                    const void* w[R];
                    const int rr = weights(rb, w);
                    for (int64_t tb = 0; tb < nt; tb += T) call(rb, w, rr, tb);
                }
            } else {
                for (int64_t tb = 0; tb < nt; tb += T)
                    for (int64_t rb = 0; rb < n_rb; ++rb) {
                        const void* w[R];
                        const int rr = weights(rb, w);
                        call(rb, w, rr, tb);
                    }
            }
        }
    }
}

template <class S>
void float_matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                  const GemmTiles& tiles) {
    FloatTask a{static_cast<const uint8_t*>(w.data), row_bytes(w), w.type, w.rows, w.cols, x, n_tokens, y, tiles};
    a.tiles.kc = std::max<int64_t>(S::L, a.tiles.kc / S::L * S::L);
    a.tiles.nc = (a.tiles.nc + S::T - 1) / S::T * S::T;  // whole token blocks: no short block per group
    const int64_t mc = std::max<int64_t>(S::R, a.tiles.mc / S::R * S::R);
    // Decode (one token block, weights read straight from memory): one contiguous range of rows per
    // thread, so each core follows a single sequential stream (small tasks handed out in turn make
    // both cores jump between ranges, which the prefetchers follow badly), with chunks stolen from
    // the back when a core falls behind (ThreadPool::run_streams). Prefill balances with small
    // tasks. Each output's order does not depend on the split (matmul_paths.h).
    auto rows = [&](int64_t r0, int64_t r1) {
        switch (w.type) {
            case gguf::GgmlType::F32: return run_rows<S, Elem::f32, false>(a, r0, r1);
            case gguf::GgmlType::F16: return run_rows<S, Elem::f16, false>(a, r0, r1);
            case gguf::GgmlType::BF16: return run_rows<S, Elem::bf16, false>(a, r0, r1);
            default: return run_rows<S, Elem::f32, true>(a, r0, r1);
        }
    };
    if (n_tokens <= S::T) {
        const int64_t n_blocks = (w.rows + S::R - 1) / S::R;
        pool.run_streams(n_blocks, [&](int64_t b0, int64_t b1, int) { rows(b0 * S::R, std::min(w.rows, b1 * S::R)); });
        return;
    }
    pool.run(int((w.rows + mc - 1) / mc), [&](int task, int) { rows(task * mc, std::min(w.rows, (task + 1) * mc)); });
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
