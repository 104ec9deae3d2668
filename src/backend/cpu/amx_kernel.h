// Internal: the AMX int8 tile kernel for PackedWeight panels, one algorithm over a tile-ops trait
// (amx_tiles.h: AmxHardware or AmxEmulated). Include from TUs compiled with the AVX-512 flags: the
// panel decoding and the float epilogue are AVX-512 code.
//
// Contract: bitwise the results of the AVX-512 VNNI packed kernel (matmul_packed_avx512.cpp) for
// every type, shape and token count, so the packed matmul may switch between the two by token count
// without breaking batch invariance. Why it holds:
//  - Integer sums. A B tile holds one 32-value block of two panels (16 weight rows): row k = the
//    4-byte code groups k of the 16 rows, which is the panel's vector k of each panel side by side
//    (decode_panel_block, the VNNI kernel's own decoding). An A tile is 16 tokens x the block's 32
//    int8 activations, read in place from [token][cols] with stride cols. TDPBSUD (A signed, B
//    unsigned: the same operand signs as vpdpbusd) leaves each (token, row) the exact int32 sum of
//    code x q over the block; Q6_K takes two products of 16 values (one per half, each with its own
//    scale), as the VNNI kernel keeps two sums. Integer addition is exact, so these are the VNNI
//    kernel's sums (which it splits over partial sums, or keeps 16 x the high nibbles and shifts back).
//  - Float epilogue. Per (row, token) and block, in block order: f = f32(isum + corr),
//    acc = fma(f, sc * d_x, acc), plus macc = fma(-mn, s, macc) (Q4_K / Q5_K) or fma(mn, s, macc)
//    (Q4_1); Q6_K two such FMAs with the two half scales; output acc + macc (formats with a min) or
//    acc. These are the VNNI kernel's instructions on the same values, lane for lane (a lane = a row).
// Each block has its own scales, so each tile product covers one block (K = 32) and its C tile is
// stored and folded into f32 accumulators right away.
//
// Weights are used as packed, with each block's codes unpacked into a 1 KiB scratch B tile that
// serves every token tile of a chunk of up to kAmxChunkTokens tokens. A load-time repack into a
// tile-ready layout would save that unpacking, but the panels must stay for the VNNI kernel (decode,
// below the AMX threshold): a second copy would double the resident weights, and the unpacking (16
// vector ops per block) is amortised over >= 2 token tiles at the default threshold of 32 tokens,
// against 2 x 16 x 16 x 32 multiply-adds of tile work per block. (Not measured: no AMX host yet.)
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/thread_pool.h"
#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/fused_acts.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_paths.h"
#include "backend/cpu/packed_panel.h"

namespace pagoda::kernels::detail {

// Tokens whose f32 accumulators one pass keeps (2 x 16 rows x 4 bytes each: 16 KiB, within L1).
constexpr int64_t kAmxChunkTokens = 128;
// Steps of at most this many tokens split the panels as the VNNI kernel's decode does.
constexpr int64_t kAmxStreamTokens = 16;

namespace amx {

// Tile registers. Every format: C (full token tile), A, B, and a C / A pair shaped for the last,
// partial token tile (configured once per task: LDTILECFG would zero the B tile mid-block).
// Q6_K: A and the Bs are half blocks (16 values); C1 / B1 / C1 tail are the second half's.
enum : int { kC = 0, kA = 1, kB = 2, kCTail = 3, kATail = 4, kC1 = 5, kB1 = 6, kC1Tail = 7 };

inline AmxConfig config(bool halves, int tail_rows) {
    AmxConfig c;
    const int a_bytes = halves ? 16 : 32;
    auto set = [&](int tile, int rows, int colsb) {
        c.rows[tile] = uint8_t(rows);
        c.colsb[tile] = uint16_t(rows ? colsb : 0);
    };
    set(kC, 16, 64);
    set(kA, 16, a_bytes);
    set(kB, a_bytes / 4, 64);
    set(kCTail, tail_rows, 64);
    set(kATail, tail_rows, a_bytes);
    if (halves) {
        set(kC1, 16, 64);
        set(kB1, 4, 64);
        set(kC1Tail, tail_rows, 64);
    }
    return c;
}

// One token tile on the given tile registers (full tiles and the tail have their own shapes, so
// their own registers): C = A x B, and with Halves also C1 = A' x B1 for the second 16 codes.
template <class Tiles, bool Halves, int C, int C1, int A>
inline void multiply_on(const int8_t* q, int64_t stride, int32_t (*c0)[16], int32_t (*c1)[16]) {
    Tiles::template zero<C>();
    Tiles::template load<A>(q, stride);
    Tiles::template dpbsud<C, A, kB>();
    Tiles::template store<C>(c0, 64);
    if constexpr (Halves) {
        Tiles::template zero<C1>();
        Tiles::template load<A>(q + 16, stride);
        Tiles::template dpbsud<C1, A, kB1>();
        Tiles::template store<C1>(c1, 64);
    }
}

// One token tile: rows m0.. of the chunk (mt of them; full tiles have 16) against the loaded B tiles.
template <class Tiles, bool Halves>
inline void multiply_tile(const int8_t* q, int64_t stride, int mt, int32_t (*c0)[16], int32_t (*c1)[16]) {
    if (mt == 16) multiply_on<Tiles, Halves, kC, kC1, kA>(q, stride, c0, c1);
    else multiply_on<Tiles, Halves, kCTail, kC1Tail, kATail>(q, stride, c0, c1);
}

// Rows pbase*8 .. +16 (two panels; a missing second panel repeats the first, its lanes discarded)
// for tokens [t0, t0 + nt).
template <class Tiles, Fmt F>
void panel_pair(const uint8_t* const* panels, const FusedActs& a, int64_t t0, int64_t nt, int64_t rows, int64_t row0,
                float* y) {
    using PF = PanelFormat<F>;
    constexpr bool q6 = PF::q6, kq = PF::kq, q41 = PF::q41, has_min = PF::has_min;
    alignas(64) float acc[kAmxChunkTokens][16], macc[kAmxChunkTokens][16];
    alignas(64) uint8_t btile[8][64];
    alignas(64) int32_t c0[16][16], c1[16][16];
    for (int64_t m = 0; m < nt; ++m)
        for (int r = 0; r < 16; ++r) acc[m][r] = macc[m][r] = 0.f;
    for (int64_t b = 0; b < a.nb; ++b) {
        __m256 sc[2], mn[2];
        for (int p = 0; p < 2; ++p) {
            __m256i c[8];
            const uint8_t* sbp;
            const uint8_t* pb = panel_block<F>(panels[p], b, sbp);
            decode_panel_block<F>(pb, sbp, c, sc[p], mn[p]);
            for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(&btile[k][32 * p]), c[k]);
        }
        const __m512 sc16 = _mm512_insertf32x8(_mm512_castps256_ps512(sc[0]), sc[1], 1);
        const __m512 mn16 = _mm512_insertf32x8(_mm512_castps256_ps512(mn[0]), mn[1], 1);
        Tiles::template load<kB>(btile, 64);
        if constexpr (q6) Tiles::template load<kB1>(btile[4], 64);
        for (int64_t m0 = 0; m0 < nt; m0 += 16) {
            const int mt = int(std::min<int64_t>(16, nt - m0));
            multiply_tile<Tiles, q6>(a.q + (t0 + m0) * a.cols + b * 32, a.cols, mt, c0, c1);
            for (int m = 0; m < mt; ++m) {
                const int64_t t = t0 + m0 + m, tb = t * a.nbp + b;
                const int32_t* cp = has_min ? nullptr : a.corr + t * a.nbp * 2 + b / 8 * 16 + b % 8;
                const __m512 dx = _mm512_set1_ps(a.d[tb]);
                float* ac = acc[m0 + m];
                __m512 acc_v = _mm512_load_ps(ac);
                const __m512i i0 = _mm512_add_epi32(_mm512_load_si512(c0[m]), _mm512_set1_epi32(has_min ? 0 : cp[0]));
                acc_v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(sc16, dx), acc_v);
                if constexpr (q6) {
                    const __m512i i1 = _mm512_add_epi32(_mm512_load_si512(c1[m]), _mm512_set1_epi32(cp[8]));
                    acc_v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(mn16, dx), acc_v);
                }
                _mm512_store_ps(ac, acc_v);
                if constexpr (kq || q41) {
                    float* mc = macc[m0 + m];
                    const __m512 s = _mm512_set1_ps(a.s[tb]), mv = _mm512_load_ps(mc);
                    _mm512_store_ps(mc, kq ? _mm512_fnmadd_ps(mn16, s, mv) : _mm512_fmadd_ps(mn16, s, mv));
                }
            }
        }
    }
    const int valid = int(std::min<int64_t>(16, rows - row0));
    const __mmask16 mask = __mmask16((1u << valid) - 1);
    for (int64_t m = 0; m < nt; ++m) {
        const __m512 v = _mm512_load_ps(acc[m]);
        _mm512_mask_storeu_ps(y + (t0 + m) * rows + row0, mask, has_min ? _mm512_add_ps(v, _mm512_load_ps(macc[m])) : v);
    }
}

template <class Tiles, Fmt F>
void packed_rows(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool, int64_t mc) {
    const WeightView& v = w.source();
    const int64_t panel_bytes = packed_panel_bytes(v.type, acts.nb);
    const int64_t n_panels = (v.rows + kPanelRows - 1) / kPanelRows;
    // The VNNI kernel's split (see its packed_rows): one contiguous range per thread for streaming
    // steps (run_streams), small tasks of mc rows for compute-bound ones.
    const AmxConfig cfg = config(PanelFormat<F>::q6, int(n_tokens % 16));
    auto panels_from = [&](int64_t p0, int64_t p1) {
        if (p0 >= p1) return;
        Tiles::load_config(cfg);
        for (int64_t pbase = p0; pbase < p1; pbase += 2) {
            const uint8_t* panels[2] = {w.data() + pbase * panel_bytes,
                                        w.data() + (pbase + 1 < p1 ? pbase + 1 : pbase) * panel_bytes};
            for (int64_t t0 = 0; t0 < n_tokens; t0 += kAmxChunkTokens)
                panel_pair<Tiles, F>(panels, acts, t0, std::min(kAmxChunkTokens, n_tokens - t0), v.rows,
                                     pbase * kPanelRows, y);
        }
        Tiles::release();
    };
    if (n_tokens <= kAmxStreamTokens) {
        const int64_t pairs = (n_panels + 1) / 2;
        pool.run_streams(pairs, [&](int64_t q0, int64_t q1, int) { panels_from(q0 * 2, std::min(n_panels, q1 * 2)); });
        return;
    }
    const int64_t per_task = std::max<int64_t>(1, mc / kPanelRows / 2) * 2;
    pool.run(int((n_panels + per_task - 1) / per_task), [&](int task, int) {
        panels_from(task * per_task, std::min(n_panels, (task + 1) * per_task));
    });
}

}  // namespace amx

// The AMX packed matmul over the operands the VNNI entry points built (the same FusedActs).
template <class Tiles>
void amx_packed_matmul(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                       const GemmTiles& tiles) {
    switch (w.source().type) {
        case gguf::GgmlType::Q4_0: return amx::packed_rows<Tiles, Fmt::q4_0>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q4_1: return amx::packed_rows<Tiles, Fmt::q4_1>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q8_0: return amx::packed_rows<Tiles, Fmt::q8_0>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q4_K: return amx::packed_rows<Tiles, Fmt::q4_k>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q5_K: return amx::packed_rows<Tiles, Fmt::q5_k>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q6_K: return amx::packed_rows<Tiles, Fmt::q6_k>(w, acts, n_tokens, y, pool, tiles.mc);
        default: fail("matmul: no AMX kernel for {}", gguf::type_name(uint32_t(w.source().type)));
    }
}

}  // namespace pagoda::kernels::detail
