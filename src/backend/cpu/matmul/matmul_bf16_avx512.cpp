// AVX-512 BF16 kernel for bf16 panels (layout and arithmetic contract: PackedWeight in matmul.h). One
// zmm lane per row of a 16-row panel: vdpbf16ps multiplies a column pair of the 16 rows with the
// broadcast bf16 pair of one token and adds both products into that row's f32 lane, so each output is
// one accumulation chain over the column pairs in order and never needs a horizontal reduction.
// The activations are rounded to bf16 once per call into a buffer all threads read (bf16_rows.h).
// Prefill: P panels x T tokens of accumulators per micro-kernel (register blocking; the weight vector
// is reused T times, the broadcast pair P times), tasks of GemmTiles::mc rows x nc tokens. Decode
// streams the weights: one contiguous range of panels per thread, one panel at a time (a single
// sequential stream per core that the hardware prefetchers follow). Neither the blocking nor the
// thread split changes an output's chain, so results are batch invariant.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "backend/cpu/matmul/bf16_rows.h"
#include "backend/cpu/matmul/matmul_paths.h"

namespace pagoda::backend::cpu::detail {
namespace {

constexpr int kPrefillPanels = 4, kPrefillTokens = 6;

// out[t * P + p] = the 16 rows of panel p dotted with token t0 + t, for T tokens.
template <int P, int T>
void bf16_kernel(const uint8_t* const* panels, const Bf16Rows& a, int64_t t0, __m512* out) {
    __m512 acc[T][P];
    for (int t = 0; t < T; ++t)
        for (int p = 0; p < P; ++p) acc[t][p] = _mm512_setzero_ps();
    const uint32_t* x = a.x + t0 * a.stride;
    for (int64_t j = 0; j < a.n_pairs; ++j) {
        __m512bh w[P];
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) w[p] = (__m512bh)_mm512_load_si512(panels[p] + j * 64);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[t * a.stride + j]));
#pragma GCC unroll 8
            for (int p = 0; p < P; ++p) acc[t][p] = _mm512_dpbf16_ps(acc[t][p], w[p], xb);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int p = 0; p < P; ++p) out[t * P + p] = acc[t][p];
}

template <int P, int T>
void bf16_dispatch(int tokens, const uint8_t* const* panels, const Bf16Rows& a, int64_t t0, __m512* out) {
    if constexpr (T > 1) {
        if (tokens < T) return bf16_dispatch<P, T - 1>(tokens, panels, a, t0, out);
    }
    bf16_kernel<P, T>(panels, a, t0, out);
}

// Panels [p0, p1) x tokens [t_begin, t_end), P panels x T tokens at a time.
template <int P, int T>
void bf16_block(const PackedWeight& w, const Bf16Rows& a, int64_t p0, int64_t p1, int64_t t_begin, int64_t t_end,
                float* y) {
    const int64_t rows = w.source().rows, panel_bytes = bf16_panel_bytes(w.source().cols);
    for (int64_t pbase = p0; pbase < p1; pbase += P) {
        const int pp = int(std::min<int64_t>(P, p1 - pbase));
        const uint8_t* panels[P];
        // Missing panels of a partial group repeat the first; their results are discarded.
        for (int p = 0; p < P; ++p) panels[p] = w.data() + (pbase + (p < pp ? p : 0)) * panel_bytes;
        __m512 out[T * P];
        for (int64_t t0 = t_begin; t0 < t_end; t0 += T) {
            const int tt = int(std::min<int64_t>(T, t_end - t0));
            bf16_dispatch<P, T>(tt, panels, a, t0, out);
            for (int t = 0; t < tt; ++t)
                for (int p = 0; p < pp; ++p) {
                    const int64_t row0 = (pbase + p) * kBf16PanelRows;
                    const int valid = int(std::min<int64_t>(kBf16PanelRows, rows - row0));
                    _mm512_mask_storeu_ps(y + (t0 + t) * rows + row0, __mmask16((1u << valid) - 1), out[t * P + p]);
                }
        }
    }
}

}  // namespace

void matmul_bf16_avx512(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                        const GemmTiles& tiles) {
    const WeightView& v = w.source();
    thread_local AlignedBuffer<uint32_t> buf;
    const Bf16Rows acts = round_bf16_rows(x, n_tokens, v.cols, buf, pool);
    const int64_t n_panels = (v.rows + kBf16PanelRows - 1) / kBf16PanelRows;
    if (n_tokens == 1) {
        pool.run_streams(n_panels, [&](int64_t p0, int64_t p1, int) { bf16_block<1, 1>(w, acts, p0, p1, 0, 1, y); });
        return;
    }
    constexpr int P = kPrefillPanels, T = kPrefillTokens;
    const int64_t panels_per_task = std::max<int64_t>(1, (tiles.mc + kBf16PanelRows * P - 1) / (kBf16PanelRows * P)) * P;
    const int64_t tokens_per_task = std::max<int64_t>(1, (tiles.nc + T - 1) / T) * T;
    const int64_t n_groups = (n_panels + panels_per_task - 1) / panels_per_task;
    const int64_t n_chunks = (n_tokens + tokens_per_task - 1) / tokens_per_task;
    // Chunk-major: the threads share one chunk of activations (kept in cache) while they split the rows.
    pool.run(int(n_groups * n_chunks), [&](int task, int) {
        const int64_t g = task % n_groups, c = task / n_groups;
        const int64_t p0 = g * panels_per_task, t0 = c * tokens_per_task;
        bf16_block<P, T>(w, acts, p0, std::min(n_panels, p0 + panels_per_task), t0,
                         std::min(n_tokens, t0 + tokens_per_task), y);
    });
}

}  // namespace pagoda::backend::cpu::detail
