// Internal: the AMX bf16 tile kernel for F16 / BF16 weights (the amx_bf16 method), one algorithm over
// a tile-ops trait (amx_tiles.h: AmxHardware or AmxEmulated). Include from TUs compiled with the
// AVX-512 flags (the activation rounding and the epilogue are AVX-512F code).
//
// Operands. B tiles are the weight panels as pack_bf16_panels writes them, padded to whole K tiles
// (bf16_tile_panel_bytes): panel p holds rows 16p..16p+15, its K tile k is the 1 KiB at k * 1024, row
// j of that tile = column pair 16k + j of the 16 rows (dword i = row i's pair). A tiles hold the
// activations rounded as for the bf16 dot kernel (bf16_rows.h: bf16, nearest even, denormals to signed
// zero, zero past the columns): decode reads them from token rows (Bf16Rows), prefill from a copy in
// tile order (TiledActs). C tiles are 16 tokens x 16 rows of f32.
//
// Arithmetic (what makes it batch invariant): each output (token, row) starts at +0 and takes one
// TDPBF16PS per K tile in increasing k; within one, the instruction's own order (amx_tiles.h: two
// chains over the tile's 16 pairs, summed, added to C). A C tile stored to memory and loaded back
// between K chunks keeps its f32 values exactly. An output's value therefore depends on its row's
// weights and its token's activations only: not on the token count, the other tokens, the blocking or
// the thread split. There is no threshold: every step of an amx_bf16 weight, decode included, runs
// here (a vector kernel for small steps would have to reproduce the instruction's rounding bit for
// bit, which only an AMX host could confirm).
//
// Blocking. Decode (at most kStreamTokens tokens): one token tile x 2 panels with their whole K walk,
// each thread one contiguous range of panel pairs (a sequential stream per core). Prefill: a block is
// 2 token tiles x 2 panels (4 C tiles, 2 A, 2 B: the 8 registers; per K tile 2 A and 2 B loads feed 4
// products); a task (panels x token tiles) walks K in chunks of kKChunk tiles, and per chunk each
// panel pair's B chunk (16 KiB, in L1) serves every token tile pair of the task. Measured on the Xeon
// with AMX (docs/benchmarks.md): 1.1-1.3x the former whole-K blocks over token rows at 64-512 tokens
// on one core; the instruction mix itself (2 x 2 blocks, operands in L1) runs ~2.2 TFLOP/s a core
// there with a model's data, and the kernel about half of that: its weights come from L3.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "backend/cpu/amx/amx_tiles.h"
#include "backend/cpu/matmul/bf16_rows.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/matmul_paths.h"

namespace pagoda::backend::cpu::detail {

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
    if (valid == 16 && mt == 16) return Tiles::template store<C>(y + t0 * rows + row0, rows * 4);
    alignas(64) float c[16][16];
    Tiles::template store<C>(c, 64);
    const __mmask16 mask = __mmask16((1u << valid) - 1);
    for (int m = 0; m < mt; ++m) _mm512_mask_storeu_ps(y + (t0 + m) * rows + row0, mask, _mm512_load_ps(c[m]));
}

// Decode (steps of at most kStreamTokens tokens, one token tile of m rows): panels [p0, p1) on the
// calling thread, two at a time, each with its whole K walk.
template <class Tiles, bool TwoN>
void stream_block(const uint8_t* panel0, const uint8_t* panel1, const Bf16Rows& a, int m, int64_t rows, int64_t row0, float* y) {
    Tiles::template zero<kC00>();
    if constexpr (TwoN) Tiles::template zero<kC01>();
    const int64_t a_stride = a.stride * 4, k_tiles = a.stride / kBf16TilePairs;
    for (int64_t k = 0; k < k_tiles; ++k) {
        Tiles::template load<kA0>(a.x + k * kBf16TilePairs, a_stride);
        Tiles::template load<kB0>(panel0 + k * 1024, 64);
        Tiles::template dpbf16ps<kC00, kA0, kB0>();
        if constexpr (TwoN) {
            Tiles::template load<kB1>(panel1 + k * 1024, 64);
            Tiles::template dpbf16ps<kC01, kA0, kB1>();
        }
    }
    store_out<Tiles, kC00>(y, rows, 0, m, row0);
    if constexpr (TwoN) store_out<Tiles, kC01>(y, rows, 0, m, row0 + 16);
}

template <class Tiles>
void run_stream(const PackedWeight& w, const Bf16Rows& a, int64_t p0, int64_t p1, int64_t n_tokens, float* y) {
    const int64_t rows = w.source().rows, panel_bytes = bf16_tile_panel_bytes(w.source().cols);
    const int m = int(n_tokens);
    Tiles::load_config(config(m, 0));
    for (int64_t p = p0; p < p1; p += 2) {
        const uint8_t* panel0 = w.data() + p * panel_bytes;
        if (p + 1 < p1) stream_block<Tiles, true>(panel0, panel0 + panel_bytes, a, m, rows, p * kBf16PanelRows, y);
        else stream_block<Tiles, false>(panel0, nullptr, a, m, rows, p * kBf16PanelRows, y);
    }
    Tiles::release();
}

// Steps of more than kStreamTokens tokens. The activations are rounded into tile order
// ([token tile][K tile][16 tokens][16 pairs], tokens past the step zero), so each A tile is 1 KiB
// contiguous: read from token rows, a tile's 16 rows sat a row apart and, at 2048 columns (4 KiB
// rows), all in one L1 set. Every tile is configured with 16 rows: a tail tile's zero rows give
// zero results that store_out leaves out.
struct TiledActs {
    const uint32_t* x = nullptr;
    int64_t k_tiles = 0;
    const uint32_t* at(int64_t tile, int64_t k) const { return x + (tile * k_tiles + k) * 256; }
};

inline TiledActs round_bf16_tiles(const float* x, int64_t n_tokens, int64_t cols, AlignedBuffer<uint32_t>& buf,
                                  ThreadPool& pool) {
    TiledActs a;
    a.k_tiles = ((cols + 1) / 2 + kBf16TilePairs - 1) / kBf16TilePairs;
    const int64_t n_tiles = (n_tokens + 15) / 16;
    const size_t need = size_t(n_tiles * a.k_tiles * 256);
    if (buf.size() < need) buf = AlignedBuffer<uint32_t>(need);
    uint32_t* out = buf.data();
    auto tile = [&](int64_t tt) {
        for (int64_t m = 0; m < 16; ++m) {
            const int64_t t = tt * 16 + m;
            uint32_t* dst = out + tt * a.k_tiles * 256 + m * 16;
            if (t >= n_tokens) {
                for (int64_t k = 0; k < a.k_tiles; ++k) _mm512_store_si512(dst + k * 256, _mm512_setzero_si512());
                continue;
            }
            for (int64_t k = 0; k < a.k_tiles; ++k) _mm512_store_si512(dst + k * 256, round_bf16_chunk(x + t * cols, cols, k * 32));
        }
    };
    if (n_tiles == 1) tile(0);
    else pool.run(int(n_tiles), [&](int tt, int) { tile(tt); });
    a.x = out;
    return a;
}

// K tiles per chunk of the tiled path: a panel pair's chunk of B (2 x 8 KiB) stays in L1 while the
// task's token tiles pass over it; the C tiles go to a scratch between chunks (an f32 store and
// reload is exact, so the per-output order of TDPBF16PS over K tiles is unchanged).
constexpr int64_t kKChunk = 8;
// Fewest token tiles per prefill task. Each task reads its panels' weights once per K chunk from
// wherever they are (L3 for a layer's matrices), so short token runs re-read them often: on the
// Xeon with AMX (docs/benchmarks.md) the default 64 tokens a task ran a 2048 x 768 product at 512
// tokens 0.85x the speed of 256 or more. Results do not depend on it.
constexpr int64_t kMinTaskTiles = 16;

// One block of a K chunk: token tiles tt (and tt + 1, TwoM) x panels p (and p + 1, TwoN); the C
// tiles start at zero (first chunk) or from cbuf, and end in y (last chunk) or in cbuf.
template <class Tiles, bool TwoM, bool TwoN>
void tiled_block(const uint8_t* panel0, const uint8_t* panel1, const TiledActs& a, int64_t tt, int64_t k0, int64_t k1,
                 float* c00, float* c01, float* c10, float* c11, bool first, bool last, int64_t n_tokens, int64_t rows,
                 int64_t row0, float* y) {
    if (first) {
        Tiles::template zero<kC00>();
        if constexpr (TwoN) Tiles::template zero<kC01>();
        if constexpr (TwoM) Tiles::template zero<kC10>();
        if constexpr (TwoM && TwoN) Tiles::template zero<kC11>();
    } else {
        Tiles::template load<kC00>(c00, 64);
        if constexpr (TwoN) Tiles::template load<kC01>(c01, 64);
        if constexpr (TwoM) Tiles::template load<kC10>(c10, 64);
        if constexpr (TwoM && TwoN) Tiles::template load<kC11>(c11, 64);
    }
    for (int64_t k = k0; k < k1; ++k) {
        Tiles::template load<kA0>(a.at(tt, k), 64);
        Tiles::template load<kB0>(panel0 + k * 1024, 64);
        Tiles::template dpbf16ps<kC00, kA0, kB0>();
        if constexpr (TwoN) {
            Tiles::template load<kB1>(panel1 + k * 1024, 64);
            Tiles::template dpbf16ps<kC01, kA0, kB1>();
        }
        if constexpr (TwoM) {
            Tiles::template load<kA1>(a.at(tt + 1, k), 64);
            Tiles::template dpbf16ps<kC10, kA1, kB0>();
            if constexpr (TwoN) Tiles::template dpbf16ps<kC11, kA1, kB1>();
        }
    }
    if (!last) {
        Tiles::template store<kC00>(c00, 64);
        if constexpr (TwoN) Tiles::template store<kC01>(c01, 64);
        if constexpr (TwoM) Tiles::template store<kC10>(c10, 64);
        if constexpr (TwoM && TwoN) Tiles::template store<kC11>(c11, 64);
        return;
    }
    const int64_t t0 = tt * 16;
    const int m0 = int(std::min<int64_t>(16, n_tokens - t0));
    store_out<Tiles, kC00>(y, rows, t0, m0, row0);
    if constexpr (TwoN) store_out<Tiles, kC01>(y, rows, t0, m0, row0 + 16);
    if constexpr (TwoM) {
        const int m1 = int(std::min<int64_t>(16, n_tokens - t0 - 16));
        store_out<Tiles, kC10>(y, rows, t0 + 16, m1, row0);
        if constexpr (TwoN) store_out<Tiles, kC11>(y, rows, t0 + 16, m1, row0 + 16);
    }
}

// Panels [p0, p1) x token tiles [tt0, tt1): per K chunk, each panel pair's B chunk serves every
// token tile pair of the task. cbuf: (p1 - p0) x (tt1 - tt0) C tiles of 1 KiB (when K has more
// than one chunk).
template <class Tiles>
void run_tiled(const PackedWeight& w, const TiledActs& a, int64_t p0, int64_t p1, int64_t tt0, int64_t tt1,
               int64_t n_tokens, float* cbuf, float* y) {
    const int64_t rows = w.source().rows, panel_bytes = bf16_tile_panel_bytes(w.source().cols);
    const int64_t n_tt = tt1 - tt0;
    Tiles::load_config(config(16, 16));
    for (int64_t k0 = 0; k0 < a.k_tiles; k0 += kKChunk) {
        const int64_t k1 = std::min(a.k_tiles, k0 + kKChunk);
        const bool first = k0 == 0, last = k1 == a.k_tiles;
        for (int64_t p = p0; p < p1; p += 2) {
            const uint8_t* panel0 = w.data() + p * panel_bytes;
            const uint8_t* panel1 = panel0 + panel_bytes;
            const bool two_n = p + 1 < p1;
            const int64_t row0 = p * kBf16PanelRows;
            for (int64_t tt = tt0; tt < tt1; tt += 2) {
                float* c00 = cbuf + ((p - p0) * n_tt + (tt - tt0)) * 256;
                float* c01 = c00 + n_tt * 256;
                float* c10 = c00 + 256;
                float* c11 = c01 + 256;
                if (tt + 1 < tt1) {
                    if (two_n) tiled_block<Tiles, true, true>(panel0, panel1, a, tt, k0, k1, c00, c01, c10, c11, first, last, n_tokens, rows, row0, y);
                    else tiled_block<Tiles, true, false>(panel0, panel1, a, tt, k0, k1, c00, c01, c10, c11, first, last, n_tokens, rows, row0, y);
                } else {
                    if (two_n) tiled_block<Tiles, false, true>(panel0, panel1, a, tt, k0, k1, c00, c01, c10, c11, first, last, n_tokens, rows, row0, y);
                    else tiled_block<Tiles, false, false>(panel0, panel1, a, tt, k0, k1, c00, c01, c10, c11, first, last, n_tokens, rows, row0, y);
                }
            }
        }
    }
    Tiles::release();
}

}  // namespace amx_bf16

// y = W x for a weight packed as AMX bf16 tile panels (PackedLayout::bf16_tiles).
template <class Tiles>
void amx_bf16_matmul(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, const GemmTiles& tiles) {
    using namespace amx_bf16;
    const WeightView& v = w.source();
    thread_local AlignedBuffer<uint32_t> buf;
    const int64_t n_panels = (v.rows + kBf16PanelRows - 1) / kBf16PanelRows;
    if (n_tokens <= kStreamTokens) {
        const Bf16Rows acts = round_bf16_rows(x, n_tokens, v.cols, buf, pool);
        const int64_t pairs = (n_panels + 1) / 2;
        pool.run_streams(pairs, [&](int64_t q0, int64_t q1, int) {
            if (q0 < q1) run_stream<Tiles>(w, acts, q0 * 2, std::min(n_panels, q1 * 2), n_tokens, y);
        });
        return;
    }
    const TiledActs tiled = round_bf16_tiles(x, n_tokens, v.cols, buf, pool);
    const int64_t panels_per_task = std::max<int64_t>(1, (tiles.mc + 31) / 32) * 2;
    // Token tiles per task: tiles.nc tokens, at least kMinTaskTiles (the weights stream from L3 once
    // per task; see kMinTaskTiles).
    const int64_t tiles_per_task = std::max(kMinTaskTiles, std::max<int64_t>(1, (tiles.nc + 31) / 32) * 2);
    const int64_t n_tt = (n_tokens + 15) / 16;
    const int64_t n_groups = (n_panels + panels_per_task - 1) / panels_per_task;
    const int64_t n_chunks = (n_tt + tiles_per_task - 1) / tiles_per_task;
    pool.run(int(n_groups * n_chunks), [&](int task, int) {
        const int64_t g = task % n_groups, c = task / n_groups;
        const int64_t p0 = g * panels_per_task, tt0 = c * tiles_per_task;
        thread_local AlignedBuffer<float> cbuf;
        const size_t need = size_t(panels_per_task * tiles_per_task * 256);
        if (cbuf.size() < need) cbuf = AlignedBuffer<float>(need);
        run_tiled<Tiles>(w, tiled, p0, std::min(n_panels, p0 + panels_per_task), tt0, std::min(n_tt, tt0 + tiles_per_task),
                         n_tokens, cbuf.data(), y);
    });
}

}  // namespace pagoda::backend::cpu::detail
