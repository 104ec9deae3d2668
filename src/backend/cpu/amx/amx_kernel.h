// Internal: the AMX int8 tile kernel for PackedWeight panels, one algorithm over a tile-ops trait
// (amx_tiles.h: AmxHardware or AmxEmulated). Include from TUs compiled with the AVX-512 flags: the
// panel decoding and the float epilogue are AVX-512 code.
//
// Contract: bitwise the results of the AVX-512 VNNI packed kernel (matmul_packed_avx512.cpp) for
// every type, shape and token count, so the packed matmul may switch between the two by token count
// without breaking batch invariance. Why it holds:
//  - Integer sums. A B tile holds one 32-value block of two panels (16 weight rows): row k = the
//    4-byte code groups k of the 16 rows, which is the panel's vector k of each panel side by side
//    (decode_panel_block, the VNNI kernel's own decoding), with the format's code offset (Q4_0 8,
//    Q8_0 and the codebook types 128, Q6_K 32, else 0) taken off, so the codes are the signed weights. An A tile is 16
//    tokens x the block's 32 int8 activations, copied per step into [tile][block][token][32] so
//    that one tile is 512 contiguous bytes (TileOperands).
//    TDPBSSD leaves each (token, row) the exact int32 sum of (code - offset) x q over the block, which
//    is the VNNI kernel's isum + corr (corr = -offset * sum(q), exact); Q6_K takes two products of 16
//    values (one per half, each with its own scale), as the VNNI kernel keeps two sums.
//  - Float epilogue. Per (row, token) and block, in block order: f = f32(isum + corr),
//    acc = fma(f, sc * d_x, acc), plus macc = fma(-mn, s, macc) (Q4_K / Q5_K) or fma(mn, s, macc)
//    (Q4_1); Q6_K two such FMAs with the two half scales; output acc + macc (formats with a min) or
//    acc. These are the VNNI kernel's instructions on the same values, lane for lane (a lane = a row).
// Each block has its own scales, so each tile product covers one block (K = 32) and its C tile is
// stored and folded into f32 accumulators right away.
//
// Speed (measured on a Xeon with AMX, docs/benchmarks.md). The per-block epilogue (convert, scale,
// FMA: 3 vector operations per token and 16 rows) is the bound, not the tiles, so the kernel keeps
// the epilogue's accumulators in registers and the tile unit busy beside it:
//  - per pair of panels, every block's B tile is decoded once into a per-thread scratch (nb KiB / 2,
//    in L2) and then serves every token tile of the step;
//  - a token tile (16 tokens) walks the blocks with its 16 accumulators (one zmm per token, lanes =
//    rows) in registers;
//  - the tile products run ahead of the epilogue: four C tiles rotate over the blocks (Q6_K: two
//    pairs), so block b + 3's product runs while block b's result is stored and folded;
//  - the A tiles are read from a per-step copy of the activations in tile order (TileOperands).
// Per core that reaches about half of what a micro-benchmark of the same instructions allows
// (bench/amx_instruction_bench.cpp); storing each C tile one or two blocks ahead of its epilogue,
// prefetching A and one C buffer for all slots were measured and did not help (docs/benchmarks.md).
// The first version (one C tile, accumulators in memory, a product waited for before the next) ran
// at the VNNI kernel's speed: each block's product, store and epilogue were one dependent chain.
// The weights stay in the VNNI layout (decode below the threshold still streams them) rather than
// being repacked into a second, tile-ready copy: that would double the resident weights, while the
// decode per pair is amortised over every token tile of the step.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "backend/cpu/amx/amx_tiles.h"
#include "backend/cpu/int8/fused_acts.h"
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "backend/cpu/packed/packed_panel.h"

namespace pagoda::backend::cpu::detail {

// Steps of at most this many tokens split the panels as the VNNI kernel's decode does.
constexpr int64_t kAmxStreamTokens = 16;

namespace amx {

// Tile registers. One product per block (all but Q6_K): C tiles 0-3 rotate over the blocks, A and B
// alternate between 4/5 and 6/7. Q6_K (two half-block products): C tiles 2s, 2s+1 for slot s of 2,
// A 4 / 5 and B 6 / 7 for the two halves.
constexpr int kA0 = 4, kB0 = 6;

// Every C and A tile has `rows` rows (16, or the tail token tile's count).
inline AmxConfig config(bool halves, int rows) {
    AmxConfig c;
    auto set = [&](int tile, int r, int colsb) {
        c.rows[tile] = uint8_t(r);
        c.colsb[tile] = uint16_t(colsb);
    };
    const int a_bytes = halves ? 16 : 32;
    for (int t = 0; t < 4; ++t) set(t, rows, 64);
    set(kA0, rows, a_bytes);
    set(kA0 + 1, rows, a_bytes);
    set(kB0, a_bytes / 4, 64);
    set(kB0 + 1, a_bytes / 4, 64);
    return c;
}

// One panel pair decoded: per block its B tile (8 rows of 64 signed code bytes; Q6_K's halves are
// rows 0-3 and 4-7) and the 16 rows' sc and mn.
struct PairScratch {
    AlignedBuffer<uint8_t> b;
    AlignedBuffer<float> sc, mn;
    void reserve(int64_t nb) {
        if (int64_t(b.size()) < nb * 512) b.resize(size_t(nb * 512));
        if (int64_t(sc.size()) < nb * 16) {
            sc.resize(size_t(nb * 16));
            mn.resize(size_t(nb * 16));
        }
    }
};

// Rows pbase*8 .. +16 (a missing second panel repeats the first, its lanes discarded).
template <Fmt F>
void decode_pair(const uint8_t* const* panels, int64_t nb, PairScratch& s) {
    const __m256i off = _mm256_set1_epi8(int8_t(PanelFormat<F>::code_offset));
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* bt = s.b.data() + b * 512;
        for (int p = 0; p < 2; ++p) {
            __m256i c[8];
            __m256 sc, mn;
            const uint8_t* sbp;
            const uint8_t* pb = panel_block<F>(panels[p], b, nb, sbp);
            decode_panel_block<F>(pb, sbp, c, sc, mn);
            for (int k = 0; k < 8; ++k)
                _mm256_store_si256(reinterpret_cast<__m256i*>(bt + 64 * k + 32 * p), _mm256_sub_epi8(c[k], off));
            _mm256_store_ps(s.sc.data() + b * 16 + 8 * p, sc);
            _mm256_store_ps(s.mn.data() + b * 16 + 8 * p, mn);
        }
    }
}

// A step's activations regrouped per token tile (tokens past the step 0):
//  q: [tile][block][16 tokens][32 int8], so each A tile is one contiguous 512-byte load. Read in
//     place from [token][cols], a tile's 16 rows sat 'cols' bytes apart, each load touched 16 lines
//     (half of each used) and waited on them: the A loads were the kernel's hottest instructions.
//  d, s: [tile][block][16 tokens], a token tile's 16 broadcasts of block b at fixed offsets of one
//     line.
// Built once per step, token tiles in parallel, and read by every worker. It costs the step's int8
// activations again (n_tokens x cols bytes, plus 4-8 bytes per token and block), kept by the calling
// thread for the next step: with 8 192 tokens a step and 14 336 columns, 112 MiB.
struct TileOperands {
    AlignedBuffer<int8_t> q;
    AlignedBuffer<float> d, s;
    void reserve(const FusedActs& a, int64_t n_tokens, bool with_s) {
        const int64_t tiles = (n_tokens + 15) / 16, n = tiles * a.nb * 16;
        if (int64_t(q.size()) < n * 32) q.resize(size_t(n * 32));
        if (int64_t(d.size()) < n) d.resize(size_t(n));
        if (with_s && int64_t(s.size()) < n) s.resize(size_t(n));
    }
    void build_tile(const FusedActs& a, int64_t n_tokens, bool with_s, int64_t tile) {
        int8_t* qt = q.data() + tile * a.nb * 512;
        float* dt = d.data() + tile * a.nb * 16;
        float* st = with_s ? s.data() + tile * a.nb * 16 : nullptr;
        for (int64_t m = 0; m < 16; ++m) {
            const int64_t t = tile * 16 + m;
            const bool real = t < n_tokens;
            const int8_t* src = a.q + t * a.cols;
            for (int64_t b = 0; b < a.nb; ++b) {
                __m256i v = real ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b * 32)) : _mm256_setzero_si256();
                _mm256_store_si256(reinterpret_cast<__m256i*>(qt + b * 512 + m * 32), v);
                dt[b * 16 + m] = real ? a.d[t * a.nbp + b] : 0.f;
                if (st) st[b * 16 + m] = real ? a.s[t * a.nbp + b] : 0.f;
            }
        }
    }
};

// One token tile (16 tokens, mt of them real: the tile shapes are configured for mt) against a
// decoded panel pair. Every step is forced inline into token_tile so the 16 accumulators stay in
// registers and the slot numbers (tile registers) are constants.
struct TileCtx {
    const uint8_t* bt;   // PairScratch::b
    const float* sc;     // PairScratch::sc
    const float* sc1;    // PairScratch::mn (Q6_K: the second half's scales)
    const int8_t* q;     // TileOperands::q of this tile: [block][16][32]
    const float* dt;     // TileOperands::d of this tile: [block][16]
    int32_t (*cbuf)[16][16];
};

#define PAGODA_AMX_INLINE inline __attribute__((always_inline))
#define PAGODA_AMX_ALWAYS __attribute__((always_inline))

// f(std::integral_constant<int, m>) for m = 0 .. N-1, unrolled in the source. The 16 accumulators
// stay in registers only if every index into them is a constant when GCC's scalar replacement runs,
// which is before `#pragma GCC unroll` takes effect: with a loop index the array lives on the stack
// and every FMA of the epilogue becomes a load, the FMA and a store (measured: half the speed).
template <int N, class Fn>
PAGODA_AMX_INLINE void each_index(Fn&& f) {
    [&]<int... M>(std::integer_sequence<int, M...>) PAGODA_AMX_ALWAYS {
        (f(std::integral_constant<int, M>{}), ...);
    }(std::make_integer_sequence<int, N>{});
}

template <class Tiles, Fmt F, int S>
PAGODA_AMX_INLINE void issue(const TileCtx& c, int64_t b) {
    const uint8_t* bt = c.bt + b * 512;
    if constexpr (PanelFormat<F>::q6) {
        constexpr int C = 2 * S;
        Tiles::template zero<C>();
        Tiles::template zero<C + 1>();
        Tiles::template load<kA0>(c.q + b * 512, 32);
        Tiles::template load<kB0>(bt, 64);
        Tiles::template dpbssd<C, kA0, kB0>();
        Tiles::template load<kA0 + 1>(c.q + b * 512 + 16, 32);
        Tiles::template load<kB0 + 1>(bt + 256, 64);
        Tiles::template dpbssd<C + 1, kA0 + 1, kB0 + 1>();
    } else {
        constexpr int A = kA0 + S % 2, B = kB0 + S % 2;
        Tiles::template zero<S>();
        Tiles::template load<A>(c.q + b * 512, 32);
        Tiles::template load<B>(bt, 64);
        Tiles::template dpbssd<S, A, B>();
    }
}

template <class Tiles, Fmt F, int S>
PAGODA_AMX_INLINE void finish(const TileCtx& c, int64_t b, __m512 (&acc)[16]) {
    constexpr bool q6 = PanelFormat<F>::q6;
    constexpr int C = q6 ? 2 * S : S;
    Tiles::template store<C>(c.cbuf[C], 64);
    if constexpr (q6) Tiles::template store<C + 1>(c.cbuf[C + 1], 64);
    const __m512 sc = _mm512_load_ps(c.sc + b * 16);
    const __m512 sc1 = q6 ? _mm512_load_ps(c.sc1 + b * 16) : sc;
    const float* d = c.dt + b * 16;
    each_index<16>([&](auto m) PAGODA_AMX_ALWAYS {
        const __m512 dx = _mm512_set1_ps(d[m]);
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c.cbuf[C][m])), _mm512_mul_ps(sc, dx), acc[m]);
        if constexpr (q6)
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c.cbuf[C + 1][m])), _mm512_mul_ps(sc1, dx), acc[m]);
    });
}

// Stage S of a round of Slots blocks from b: issue block b + S + Slots - 1 (into the slot block
// b + S frees next round), then finish block b + S. False once the blocks run out.
template <class Tiles, Fmt F, int Slots, int S>
PAGODA_AMX_INLINE bool stage(const TileCtx& c, int64_t b, int64_t nb, __m512 (&acc)[16]) {
    if (b + S >= nb) return false;
    if (b + S + Slots - 1 < nb) issue<Tiles, F, (S + Slots - 1) % Slots>(c, b + S + Slots - 1);
    finish<Tiles, F, S>(c, b + S, acc);
    return true;
}

template <class Tiles, Fmt F, int... S>
PAGODA_AMX_INLINE void rotate(const TileCtx& c, int64_t nb, __m512 (&acc)[16], std::integer_sequence<int, S...>) {
    constexpr int slots = sizeof...(S);
    ((S + 1 < slots && S < nb ? issue<Tiles, F, S>(c, S) : void()), ...);  // the first slots - 1 blocks
    for (int64_t b = 0; b < nb; b += slots)
        if (!(stage<Tiles, F, slots, S>(c, b, nb, acc) && ...)) break;
}

// acc[m] = the (token m, 16 rows) sums over every block. The products run ahead of the epilogue:
// block b's slot is b % slots (4 C tiles; Q6_K 2 pairs), issued slots - 1 blocks before it is finished.
template <class Tiles, Fmt F>
PAGODA_AMX_INLINE void token_tile(const TileCtx& c, int64_t nb, __m512 (&acc)[16]) {
    each_index<16>([&](auto m) PAGODA_AMX_ALWAYS { acc[m] = _mm512_setzero_ps(); });
    rotate<Tiles, F>(c, nb, acc, std::make_integer_sequence<int, PanelFormat<F>::q6 ? 2 : 4>{});
}

// The min term of formats with one (Q4_1: +mn * s, K-quants: -mn * s), per (token, row), block order.
template <Fmt F>
void min_terms(const PairScratch& s, const float* st, int64_t nb, float (*out)[16]) {
    __m512 macc[16];
    each_index<16>([&](auto m) PAGODA_AMX_ALWAYS { macc[m] = _mm512_setzero_ps(); });
    for (int64_t b = 0; b < nb; ++b) {
        const __m512 mn = _mm512_load_ps(s.mn.data() + b * 16);
        each_index<16>([&](auto m) PAGODA_AMX_ALWAYS {
            const __m512 sv = _mm512_set1_ps(st[b * 16 + m]);
            macc[m] = PanelFormat<F>::kq ? _mm512_fnmadd_ps(mn, sv, macc[m]) : _mm512_fmadd_ps(mn, sv, macc[m]);
        });
    }
    each_index<16>([&](auto m) PAGODA_AMX_ALWAYS { _mm512_store_ps(out[m], macc[m]); });
}

template <class Tiles, Fmt F>
void packed_rows(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool, int64_t mc) {
    using PF = PanelFormat<F>;
    const WeightView& v = w.source();
    const int64_t panel_bytes = packed_panel_bytes(v.type, acts.nb);
    const int64_t n_panels = (v.rows + kPanelRows - 1) / kPanelRows;
    const int64_t full_tiles = n_tokens / 16, tail = n_tokens % 16;
    thread_local TileOperands operands;
    // The calling thread's instance, by reference: the name inside a worker's lambda is the worker's.
    TileOperands& ts = operands;
    ts.reserve(acts, n_tokens, PF::has_min);
    const int64_t n_tiles = full_tiles + (tail ? 1 : 0);
    if (n_tiles == 1) ts.build_tile(acts, n_tokens, PF::has_min, 0);  // a small step: no pool round trip
    else pool.run(int(n_tiles), [&](int tile, int) { ts.build_tile(acts, n_tokens, PF::has_min, tile); });
    // The VNNI kernel's split (see its packed_rows): one contiguous range per thread for streaming
    // steps (run_streams), small tasks of mc rows for compute-bound ones.
    auto panels_from = [&](int64_t p0, int64_t p1) {
        if (p0 >= p1) return;
        thread_local PairScratch scratch;
        scratch.reserve(acts.nb);
        alignas(64) int32_t cbuf[4][16][16] = {};
        alignas(64) float mterm[16][16];
        TileCtx tile{scratch.b.data(), scratch.sc.data(), scratch.mn.data(), nullptr, nullptr, cbuf};
        __m512 acc[16];
        int configured = -1;  // the rows the tiles are configured for
        for (int64_t pbase = p0; pbase < p1; pbase += 2) {
            const uint8_t* panels[2] = {w.data() + pbase * panel_bytes,
                                        w.data() + (pbase + 1 < p1 ? pbase + 1 : pbase) * panel_bytes};
            decode_pair<F>(panels, acts.nb, scratch);
            const int64_t row0 = pbase * kPanelRows;
            const int valid = int(std::min<int64_t>(16, v.rows - row0));
            const __mmask16 mask = __mmask16((1u << valid) - 1);
            for (int64_t tt = 0; tt < n_tiles; ++tt) {
                const int mt = tt < full_tiles ? 16 : int(tail);
                if (mt != configured) {  // LDTILECFG zeroes the tiles: only between token tiles
                    Tiles::load_config(config(PF::q6, mt));
                    configured = mt;
                }
                tile.q = ts.q.data() + tt * acts.nb * 512;
                tile.dt = ts.d.data() + tt * acts.nb * 16;
                token_tile<Tiles, F>(tile, acts.nb, acc);
                if constexpr (PF::has_min) min_terms<F>(scratch, ts.s.data() + tt * acts.nb * 16, acts.nb, mterm);
                each_index<16>([&](auto m) PAGODA_AMX_ALWAYS {  // constant indices: see each_index
                    if (m >= mt) return;
                    const __m512 out = PF::has_min ? _mm512_add_ps(acc[m], _mm512_load_ps(mterm[m])) : acc[m];
                    _mm512_mask_storeu_ps(y + (tt * 16 + m) * v.rows + row0, mask, out);
                });
            }
        }
        if (configured >= 0) Tiles::release();
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
        case gguf::GgmlType::Q5_0: return amx::packed_rows<Tiles, Fmt::q5_0>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q8_0: return amx::packed_rows<Tiles, Fmt::q8_0>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q4_K: return amx::packed_rows<Tiles, Fmt::q4_k>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q5_K: return amx::packed_rows<Tiles, Fmt::q5_k>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::Q6_K: return amx::packed_rows<Tiles, Fmt::q6_k>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::IQ4_NL: return amx::packed_rows<Tiles, Fmt::iq4_nl>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::IQ4_XS: return amx::packed_rows<Tiles, Fmt::iq4_xs>(w, acts, n_tokens, y, pool, tiles.mc);
        case gguf::GgmlType::MXFP4: return amx::packed_rows<Tiles, Fmt::mxfp4>(w, acts, n_tokens, y, pool, tiles.mc);
        default: fail("matmul: no AMX kernel for {}", gguf::type_name(uint32_t(w.source().type)));
    }
}

#undef PAGODA_AMX_INLINE
#undef PAGODA_AMX_ALWAYS

}  // namespace pagoda::backend::cpu::detail
