// Internal: the AMX bf16 tile kernel for F16 / BF16 weights (the amx_bf16 method), one algorithm over
// a tile-ops trait (amx_tiles.h: AmxHardware or AmxEmulated). Include from TUs compiled with the
// AVX-512 flags (the activation rounding and the epilogue are AVX-512F code).
//
// Operands. B tiles are the weight panels as pack_bf16_panels writes them, padded to whole K tiles
// (bf16_tile_panel_bytes): panel p holds rows 16p..16p+15, its K tile k is the 1 KiB at k * 1024, row
// j of that tile = column pair 16k + j of the 16 rows (dword i = row i's pair). A tiles are the
// activation rows of the bf16 dot kernel (bf16_rows.h: rounded to bf16, nearest even, denormals to
// signed zero; a stride of whole K tiles, zero past the columns). C tiles are 16 tokens x 16 rows of f32.
//
// Arithmetic (what makes it batch invariant): each output (token, row) starts at +0 and takes one
// TDPBF16PS per K tile in increasing k; within one, the instruction's own order (amx_tiles.h: two
// chains over the tile's 16 pairs, summed, added to C). An output's value therefore depends on its
// row's weights and its token's activations only: not on the token count, the other tokens, the
// blocking or the thread split. There is no threshold: every step of an amx_bf16 weight, decode
// included, runs here (a vector kernel for small steps would have to reproduce the instruction's
// rounding bit for bit, which only an AMX host could confirm).
//
// Blocking. A block is up to 2 token tiles x 2 panels (32 tokens x 32 rows: 4 C tiles, 2 A, 2 B, the
// 8 registers); per K tile 2 A and 2 B loads feed 4 products. Tasks take token chunks x panel ranges
// (chunk-major, so threads share a chunk's activations in cache); steps of at most 16 tokens
// (decode) give each thread one contiguous range of panel pairs instead, a sequential stream per core.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/bf16_rows.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_paths.h"

namespace pagoda::kernels::detail {

namespace amx_bf16 {

constexpr int64_t kStreamTokens = 16;
// Tile registers: C[token tile][panel], A per token tile, B per panel.
enum : int { kC00 = 0, kC01 = 1, kC10 = 2, kC11 = 3, kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7 };

// Shapes for a block whose token tiles have m0 and m1 rows (m1 = 0: one token tile).
inline AmxConfig config(int m0, int m1) {
    AmxConfig c;
    auto set = [&](int tile, int rows) {
        c.rows[tile] = uint8_t(rows);
        c.colsb[tile] = uint16_t(rows ? 64 : 0);
    };
    set(kC00, m0);
    set(kC01, m0);
    set(kA0, m0);
    set(kC10, m1);
    set(kC11, m1);
    set(kA1, m1);
    set(kB0, 16);
    set(kB1, 16);
    return c;
}

// C tile -> y for tokens [t0, t0 + mt) and the 16 rows from row0 (fewer valid at the matrix end).
template <class Tiles, int C>
inline void store_out(float* y, int64_t rows, int64_t t0, int mt, int64_t row0) {
    const int valid = int(std::min<int64_t>(16, rows - row0));
    if (valid == 16) return Tiles::template store<C>(y + t0 * rows + row0, rows * 4);
    alignas(64) float c[16][16];
    Tiles::template store<C>(c, 64);
    const __mmask16 mask = __mmask16((1u << valid) - 1);
    for (int m = 0; m < mt; ++m) _mm512_mask_storeu_ps(y + (t0 + m) * rows + row0, mask, _mm512_load_ps(c[m]));
}

// One block: token tiles at t0 (m0 rows) and t0 + 16 (m1 rows, TwoM), panels pbase (and pbase + 1, TwoN).
template <class Tiles, bool TwoM, bool TwoN>
void block(const uint8_t* panel0, const uint8_t* panel1, const Bf16Rows& a, int64_t t0, int m0, int m1, int64_t rows,
           int64_t row0, float* y) {
    Tiles::template zero<kC00>();
    if constexpr (TwoN) Tiles::template zero<kC01>();
    if constexpr (TwoM) Tiles::template zero<kC10>();
    if constexpr (TwoM && TwoN) Tiles::template zero<kC11>();
    const int64_t a_stride = a.stride * 4, k_tiles = a.stride / kBf16TilePairs;
    const uint32_t* x0 = a.x + t0 * a.stride;
    const uint32_t* x1 = x0 + 16 * a.stride;
    for (int64_t k = 0; k < k_tiles; ++k) {
        Tiles::template load<kA0>(x0 + k * kBf16TilePairs, a_stride);
        Tiles::template load<kB0>(panel0 + k * 1024, 64);
        Tiles::template dpbf16ps<kC00, kA0, kB0>();
        if constexpr (TwoN) {
            Tiles::template load<kB1>(panel1 + k * 1024, 64);
            Tiles::template dpbf16ps<kC01, kA0, kB1>();
        }
        if constexpr (TwoM) {
            Tiles::template load<kA1>(x1 + k * kBf16TilePairs, a_stride);
            Tiles::template dpbf16ps<kC10, kA1, kB0>();
            if constexpr (TwoN) Tiles::template dpbf16ps<kC11, kA1, kB1>();
        }
    }
    store_out<Tiles, kC00>(y, rows, t0, m0, row0);
    if constexpr (TwoN) store_out<Tiles, kC01>(y, rows, t0, m0, row0 + 16);
    if constexpr (TwoM) store_out<Tiles, kC10>(y, rows, t0 + 16, m1, row0);
    if constexpr (TwoM && TwoN) store_out<Tiles, kC11>(y, rows, t0 + 16, m1, row0 + 16);
}

// Panels [p0, p1) x tokens [t_begin, t_end) on the calling thread.
template <class Tiles>
void run_range(const PackedWeight& w, const Bf16Rows& a, int64_t p0, int64_t p1, int64_t t_begin, int64_t t_end, float* y) {
    const int64_t rows = w.source().rows, panel_bytes = bf16_tile_panel_bytes(w.source().cols);
    int cur_m0 = -1, cur_m1 = -1;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += 32) {
        const int m0 = int(std::min<int64_t>(16, t_end - t0));
        const int m1 = int(std::clamp<int64_t>(t_end - t0 - 16, 0, 16));
        if (m0 != cur_m0 || m1 != cur_m1) {  // LDTILECFG zeroes every tile: only between blocks
            Tiles::load_config(config(m0, m1));
            cur_m0 = m0;
            cur_m1 = m1;
        }
        for (int64_t p = p0; p < p1; p += 2) {
            const uint8_t* panel0 = w.data() + p * panel_bytes;
            const uint8_t* panel1 = panel0 + panel_bytes;
            const int64_t row0 = p * kBf16PanelRows;
            const bool two_n = p + 1 < p1;
            if (m1 > 0) {
                if (two_n) block<Tiles, true, true>(panel0, panel1, a, t0, m0, m1, rows, row0, y);
                else block<Tiles, true, false>(panel0, panel1, a, t0, m0, m1, rows, row0, y);
            } else {
                if (two_n) block<Tiles, false, true>(panel0, panel1, a, t0, m0, m1, rows, row0, y);
                else block<Tiles, false, false>(panel0, panel1, a, t0, m0, m1, rows, row0, y);
            }
        }
    }
    if (cur_m0 >= 0) Tiles::release();
}

}  // namespace amx_bf16

// y = W x for a weight packed as AMX bf16 tile panels (PackedLayout::bf16_tiles).
template <class Tiles>
void amx_bf16_matmul(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, const GemmTiles& tiles) {
    using namespace amx_bf16;
    const WeightView& v = w.source();
    thread_local AlignedBuffer<uint32_t> buf;
    const Bf16Rows acts = round_bf16_rows(x, n_tokens, v.cols, buf, pool);
    const int64_t n_panels = (v.rows + kBf16PanelRows - 1) / kBf16PanelRows;
    if (n_tokens <= kStreamTokens) {
        const int64_t pairs = (n_panels + 1) / 2;
        pool.run_streams(pairs, [&](int64_t q0, int64_t q1, int) {
            run_range<Tiles>(w, acts, q0 * 2, std::min(n_panels, q1 * 2), 0, n_tokens, y);
        });
        return;
    }
    const int64_t panels_per_task = std::max<int64_t>(1, (tiles.mc + 31) / 32) * 2;
    const int64_t tokens_per_task = std::max<int64_t>(1, (tiles.nc + 31) / 32) * 32;
    const int64_t n_groups = (n_panels + panels_per_task - 1) / panels_per_task;
    const int64_t n_chunks = (n_tokens + tokens_per_task - 1) / tokens_per_task;
    pool.run(int(n_groups * n_chunks), [&](int task, int) {
        const int64_t g = task % n_groups, c = task / n_groups;
        const int64_t p0 = g * panels_per_task, t0 = c * tokens_per_task;
        run_range<Tiles>(w, acts, p0, std::min(n_panels, p0 + panels_per_task), t0, std::min(n_tokens, t0 + tokens_per_task), y);
    });
}

}  // namespace pagoda::kernels::detail
