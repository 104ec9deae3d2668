// Internal: driver of the portable int8 matmul kernel, included by matmul_int8_scalar.cpp (the SIMD
// kernels unpack weights in registers instead: int8_fused.h), with a kernel type Kern providing
// R (rows per block), T (tokens per block) and
//   template <int T> static void compute(const uint8_t* const* u, const float* const* sw,
//       const float* const* mh, const QuantizedActivations& a, int64_t t0, float* out /*[T][R]*/);
// which must produce, for each (row, token), a value that depends only on that row and that token
// (the same per-output operation sequence whatever T, R and the block position are).
#pragma once
#include <algorithm>
#include <vector>

#include "backend/cpu/int8/int8_decode.h"
#include "backend/cpu/int8/int8_operands.h"
#include "backend/cpu/matmul/matmul_paths.h"

namespace pagoda::backend::cpu::detail {
namespace {

template <class Kern, int T>
void compute_dispatch(int tokens, const uint8_t* const* u, const float* const* sw, const float* const* mh,
                      const QuantizedActivations& a, int64_t t0, float* out) {
    if constexpr (T > 1) {
        if (tokens < T) return compute_dispatch<Kern, T - 1>(tokens, u, sw, mh, a, t0, out);
    }
    Kern::template compute<T>(u, sw, mh, a, t0, out);
}

template <class Kern>
void int8_matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                 const GemmTiles& tiles) {
    constexpr int R = Kern::R, T = Kern::T;
    QuantizedActivations acts;  // read by every worker: not thread_local
    quantize_activations(x, n_tokens, w.cols, acts, pool);
    const int64_t rb_bytes = row_bytes(w);
    const int64_t nb = w.cols / 32;
    const auto* wdata = static_cast<const uint8_t*>(w.data);
    const int64_t mc = std::max<int64_t>(R, tiles.mc / R * R);
    const int64_t n_tasks = (w.rows + mc - 1) / mc;
    pool.run(int(n_tasks), [&](int task, int) {
        thread_local std::vector<uint8_t> u;
        thread_local std::vector<float> sw, mh;
        if (u.size() < size_t(R * w.cols)) u.resize(size_t(R * w.cols));
        if (sw.size() < size_t(R * 2 * nb)) { sw.resize(size_t(R * 2 * nb)); mh.resize(size_t(R * 2 * nb)); }
        const int64_t r0 = task * mc, r1 = std::min(w.rows, r0 + mc);
        for (int64_t rbase = r0; rbase < r1; rbase += R) {
            const int rr = int(std::min<int64_t>(R, r1 - rbase));
            const uint8_t* up[R];
            const float* swp[R];
            const float* mhp[R];
            for (int r = 0; r < R; ++r) {
                // Missing rows of a partial block repeat the first row; their results are discarded.
                const int src = r < rr ? r : 0;
                if (r < rr)
                    decode_row_local(w.type, wdata + (rbase + r) * rb_bytes, w.cols, u.data() + r * w.cols,
                                      sw.data() + r * 2 * nb, mh.data() + r * 2 * nb);
                up[r] = u.data() + src * w.cols;
                swp[r] = sw.data() + src * 2 * nb;
                mhp[r] = mh.data() + src * 2 * nb;
            }
            float out[T * R];
            for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
                const int tt = int(std::min<int64_t>(T, n_tokens - t0));
                compute_dispatch<Kern, T>(tt, up, swp, mhp, acts, t0, out);
                for (int t = 0; t < tt; ++t)
                    for (int r = 0; r < rr; ++r) y[(t0 + t) * w.rows + rbase + r] = out[t * R + r];
            }
        }
    });
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
