// Internal: the amx_bf16 attention method (attention.h) on a tile trait (amx_tiles.h: the
// instructions, or their emulation). One task = a run of queries of one sequence x one KV head; its
// n_queries x group query heads are the rows of 16-row A tiles (row = token * group + head).
//
// Per task: the query rows are rounded to bf16 once (A tiles of 16 dim pairs). Keys are walked in
// steps of kAmxKeys = 32 absolute positions (0..31, 32..63, ...) up to the task's last position; per
// step the K rows are rounded to bf16 and transposed into two B tiles of 16 keys each, the V rows
// rounded and interleaved by key pairs into B tiles of 16 dims. Then for every A tile that has a row
// seeing these keys:
//   scores  S = Q.K^T on TDPBF16PS (a C tile per 16 keys, one instruction per 32 dims, from zero);
//   softmax in f32 per row: s = scale * S, keys after the row's position set to -inf, the running
//           max m' = max(m, max s), alpha = e^(m - m'), p = e^(s - m') (exactly 0 for a masked key),
//           the running sum l = fma(l, alpha, sum p) (the 32 p summed in one fixed order,
//           amx_reduce_rows);
//   P.V     p rounded to bf16, P.V on TDPBF16PS into C tiles from zero, then acc = fma(acc, alpha, PV).
// At the end out = acc / l per row. Keys past the task's last position are zero rows (masked).
// A task of at most 16 query heads (a decode token) takes the decode form, the same bits with less
// data movement (amx_attend_dtype).
//
// Batch invariance: a row's arithmetic — its steps, the values in its A row, its masks, every
// reduction — depends only on its own query, its position and the cache rows up to it. A row sees
// steps up to its own position's; a later step (when its tile holds later tokens) has every key
// masked for it: alpha = e^0 = 1, p = 0, PV = +0, so acc, m and l keep their bits (acc is never -0:
// it is c or fma(acc, alpha, c) with c from sums that start at +0). TDPBF16PS computes each C row
// from its A row alone. So a token's output is the same bits decoded alone, in any prefill batch or
// chunking, and on either trait (the emulation is bitwise the instruction).
// Include only from TUs compiled with the AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/amx/amx_tiles.h"
#include "backend/cpu/attention/attention_internal.h"
#include "backend/cpu/attention/attention_walk.h"
#include "backend/cpu/matmul/bf16_rows.h"
#include "backend/cpu/simd/avx512.h"
#include "core/error.h"

namespace pagoda::backend::cpu::attention_detail {

// The longest cache row the walk reads (head_dim 1024 in f32; the zero row it reads past a task's
// last position is this long).
constexpr int kAmxMaxRowBytes = 4096;

// 16 values of a cache row of type DT from element i, the lanes outside m zero, widened to f32.
template <kv::KvDtype DT>
inline __m512 amx_load16(const uint8_t* row, int i, __mmask16 m) {
    if constexpr (DT == kv::KvDtype::f16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * size_t(i)));
    } else if constexpr (DT == kv::KvDtype::bf16) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * size_t(i))), 16));
    } else {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
    }
}

// Lanes 0..n-1 set (n clamped to 0..16).
static inline __mmask16 amx_first_lanes(int n) {
    return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

// rows[j] = the cache row of position key0 + j of the KV head at `base` for j < n (the walk's
// fill_rows: one table lookup per block), a zero row for n <= j < kAmxKeys (keys past the task's
// last position: masked, read as zeros).
static inline void amx_step_rows(const Task& t, const uint8_t* base, int32_t key0, int n, const uint8_t* zero_row,
                                 const uint8_t** rows) {
    fill_rows(t, base, key0, n, /*floor=*/0, rows);
    for (int j = n; j < kAmxKeys; ++j) rows[j] = zero_row;
}

// Lane r of the result = the sum (Add) or the maximum of the 16 lanes of v[r]: pairs of vectors
// folded together four times (unpack within 128-bit lanes by floats, then by pairs of floats, then
// 128-bit lane shuffles twice), each step halving the lanes a row holds. A row's sum is always
// reduced in the same order, whichever row it is: (lanes i and i + 2 of each 128-bit lane), then
// (i, i + 1), then 128-bit lanes (0 + 2, 1 + 3), then those two.
template <bool Add>
__attribute__((always_inline)) inline __m512 amx_reduce_rows(const __m512* v) {
    auto op = [](__m512 x, __m512 y) { return Add ? _mm512_add_ps(x, y) : _mm512_max_ps(x, y); };
    __m512 w[8], x[4], y[2];
    for (int i = 0; i < 8; ++i)  // rows 2i, 2i+1 as [2i, 2i+1, 2i, 2i+1] in each 128-bit lane
        w[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; ++i) {  // rows 4i .. 4i+3, one each, in each 128-bit lane
        const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
        x[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    for (int i = 0; i < 2; ++i)  // rows 8i .. 8i+3 in 128-bit lanes 0-1, 8i+4 .. 8i+7 in 2-3
        y[i] = op(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                  _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return op(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Transposes 16 rows of 16 dwords in place: r[i][j] becomes r[j][i] (unpacks within 128-bit lanes,
// then 128-bit lane shuffles).
__attribute__((always_inline)) inline void amx_transpose16(__m512i* r) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; ++i) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // b[4i + c], lane L: rows 4i..4i+3 of column 4L + c
        b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        const __m512i lo01 = _mm512_shuffle_i32x4(b[c], b[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i hi01 = _mm512_shuffle_i32x4(b[c], b[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i lo23 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i hi23 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
        r[c] = _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + c] = _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + c] = _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + c] = _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

// Keys key0 .. key0 + 31 (only the first n exist; the rest are zero) into the step's tiles:
// K: kt[col block][half][pair][key] (B tiles), V: vt[group][key pair][dim] (B tiles; dword = bf16
// pair, low half first).
// zero_row: row_bytes of zeros.
// With KeysAsRows (the decode form), K stays in row order instead: kt[col block][half][key][pair],
// A tiles of 16 keys.
template <kv::KvDtype DT, class Bf16, bool KeysAsRows>
void amx_prepare_keys(const Task& t, const AmxScratchLayout& L, int32_t key0, int n, const uint8_t* zero_row, uint32_t* kt,
                      uint32_t* vt) {
    const int d = t.head_dim;
    const uint8_t* rows[kAmxKeys];
    amx_step_rows(t, t.k_head, key0, n, zero_row, rows);
    for (int h = 0; h < L.halves; ++h) {
        const __mmask16 lo = amx_first_lanes(d - 32 * h), hi = amx_first_lanes(d - 32 * h - 16);
        for (int cb = 0; cb < 2; ++cb) {
            __m512i r[16];
            for (int j = 0; j < 16; ++j)
                r[j] = Bf16::pairs(amx_load16<DT>(rows[16 * cb + j], 32 * h, lo), amx_load16<DT>(rows[16 * cb + j], 32 * h + 16, hi));
            if constexpr (!KeysAsRows) amx_transpose16(r);
            uint32_t* dst = kt + (size_t(cb) * L.halves + h) * 256;
            for (int p = 0; p < 16; ++p) _mm512_store_si512(dst + p * 16, r[p]);
        }
    }
    // Word i of the rounded pair (v0 then v1) to word 2i, word 16 + i to 2i + 1: the two rows interleaved.
    alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                             8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i interleave = _mm512_load_si512(kInterleave);
    amx_step_rows(t, t.v_head, key0, n, zero_row, rows);
    for (int g = 0; g < L.groups; ++g) {
        const __mmask16 m = amx_first_lanes(d - 16 * g);
        for (int kp = 0; kp < kAmxKeys / 2; ++kp) {
            const __m512 v0 = amx_load16<DT>(rows[2 * kp], 16 * g, m);
            const __m512 v1 = amx_load16<DT>(rows[2 * kp + 1], 16 * g, m);
            _mm512_store_si512(vt + (size_t(g) * 16 + kp) * 16, _mm512_permutexvar_epi16(interleave, Bf16::pairs(v0, v1)));
        }
    }
}

// The f32 -> bf16 rounding of 32 values (lo: 0-15, hi: 16-31) into 32 consecutive words, on AVX-512F
// integer operations: any AVX-512 host (the emulated trait's). The hardware trait's TU passes a type
// with the same pairs() on VCVTNE2PS2BF16, which every AMX host has: the same bytes (bf16_round.h).
struct IntegerBf16 {
    static __m512i pairs(__m512 lo, __m512 hi) { return detail::bf16_round_pairs(lo, hi); }
};

// P.V for the A tile `ATile` (P, bf16 pairs of keys) over the step's V tiles, Chunk (3 or 4) column
// tiles of 16 dims at a time into C tiles 0..Chunk-1, each chunk stored into pv ([16][64] floats)
// and added: acc = fma(acc, alpha, PV) for the first `valid` rows (acc rows acc_ld apart).
template <class Tiles, int ATile, int Chunk>
__attribute__((always_inline)) inline void amx_pv(const uint32_t* vt, int groups, int valid, const float* alpha, float* acc,
                                                  int acc_ld, float* pv) {
    static_assert(Chunk == 3 || Chunk == 4);
    for (int g0 = 0; g0 < groups; g0 += Chunk) {
        const int ng = std::min(Chunk, groups - g0);
        Tiles::template zero<0>();
        Tiles::template zero<1>();
        Tiles::template zero<2>();
        Tiles::template load<5>(vt + size_t(g0) * 256, 64);
        Tiles::template dpbf16ps<0, ATile, 5>();
        if (ng > 1) {
            Tiles::template load<5>(vt + size_t(g0 + 1) * 256, 64);
            Tiles::template dpbf16ps<1, ATile, 5>();
        }
        if (ng > 2) {
            Tiles::template load<5>(vt + size_t(g0 + 2) * 256, 64);
            Tiles::template dpbf16ps<2, ATile, 5>();
        }
        if constexpr (Chunk == 4) {
            Tiles::template zero<3>();
            if (ng > 3) {
                Tiles::template load<5>(vt + size_t(g0 + 3) * 256, 64);
                Tiles::template dpbf16ps<3, ATile, 5>();
            }
        }
        Tiles::template store<0>(pv, 256);
        if (ng > 1) Tiles::template store<1>(pv + 16, 256);
        if (ng > 2) Tiles::template store<2>(pv + 32, 256);
        if constexpr (Chunk == 4)
            if (ng > 3) Tiles::template store<3>(pv + 48, 256);
        for (int r = 0; r < valid; ++r) {
            const __m512 al = _mm512_set1_ps(alpha[r]);
            float* arow = acc + size_t(r) * acc_ld + 16 * g0;
            for (int g = 0; g < ng; ++g)
                _mm512_store_ps(arow + 16 * g, _mm512_fmadd_ps(_mm512_load_ps(arow + 16 * g), al, _mm512_load_ps(pv + r * 64 + 16 * g)));
        }
    }
}

// Decode is the task of at most 16 query heads (one A tile: a decode token, a short run). It takes the
// decode form: scores as K.Q^T, K in row order as A tiles (no transposes of K for a single tile of
// queries), Q^T as B tiles (transposed once a task), the 16-key x 16-row C tiles transposed back to
// rows. Each score is the same bits: the tile's two chains per 32 dims multiply the same pairs in
// the same order, and a product does not depend on which operand is which. Its A and C tiles of P.V
// take just the task's rows (P in tile 3, P.V in tiles 0-2), the score tiles 16 keys.
template <class Tiles, class Bf16, kv::KvDtype DT, bool Decode>
void amx_attend_dtype(const Task& t) {
    const int d = t.head_dim, group = t.group;
    const int rows = t.n_queries * group;
    const AmxScratchLayout L = amx_scratch_layout(rows, d);
    float* const base = t.scratch;
    uint32_t* const qt = reinterpret_cast<uint32_t*>(base + L.q);
    uint32_t* const kt = reinterpret_cast<uint32_t*>(base + L.k);
    uint32_t* const vt = reinterpret_cast<uint32_t*>(base + L.v);
    float* const run_max = base + L.run_max;
    float* const run_sum = base + L.run_sum;
    float* const acc = base + L.acc;
    float* const s = base + L.scores;  // [16][32]
    uint32_t* const pt = reinterpret_cast<uint32_t*>(base + L.p);
    float* const pv = base + L.pv;  // [16][64]
    int32_t* const row_pos = reinterpret_cast<int32_t*>(base + L.pos);
    const int acc_ld = L.groups * 16;
    // Keys past the task's last position read this row: zeros (masked anyway; a finite value).
    alignas(64) static const uint8_t kZeroRow[kAmxMaxRowBytes] = {};
    const uint8_t* const zero_row = kZeroRow;

    // Query rows in bf16 A tiles; rows past `rows` are zero (their results are never read).
    for (int r = 0; r < L.a_tiles * 16; ++r) {
        const int a = r / 16, rr = r % 16;
        const float* q = r < rows ? t.q + size_t(r / group) * t.token_stride + size_t(r % group) * d : nullptr;
        for (int h = 0; h < L.halves; ++h)
            _mm512_store_si512(qt + (size_t(a) * L.halves + h) * 256 + rr * 16,
                               q ? detail::round_bf16_chunk(q, d, 32 * h) : _mm512_setzero_si512());
        row_pos[r] = r < rows ? t.pos[r / group] : -1;
        run_max[r] = -std::numeric_limits<float>::infinity();
        run_sum[r] = 0.0f;
    }
    std::memset(acc, 0, sizeof(float) * size_t(L.a_tiles) * 16 * acc_ld);

    detail::AmxConfig cfg;
    for (int i = 0; i < 8; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    if constexpr (Decode) {
        // P.V's A and C tiles with just the task's rows: the tile unit's time grows with the rows.
        for (int i = 0; i < 4; ++i) cfg.rows[i] = uint8_t(rows);
        for (int h = 0; h < L.halves; ++h) {  // Q^T: B tiles of 16 pairs x 16 rows
            __m512i q[16];
            for (int r = 0; r < 16; ++r) q[r] = _mm512_load_si512(qt + size_t(h) * 256 + r * 16);
            amx_transpose16(q);
            for (int r = 0; r < 16; ++r) _mm512_store_si512(qt + size_t(h) * 256 + r * 16, q[r]);
        }
    }
    Tiles::load_config(cfg);
    const __m512 scale = _mm512_set1_ps(t.scale);
    const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    const int32_t last = t.pos[t.n_queries - 1];
    for (int32_t key0 = 0; key0 <= last; key0 += kAmxKeys) {
        if constexpr (Decode) {
            // With t.kv_ahead (attention.h: decode_kv_prefetch): the K and V rows of the keys a
            // simd tile (kAttentionTile) ahead, requested into L2 (one head's rows per block are a
            // run too short for the hardware prefetchers).
            if (t.kv_ahead && key0 % kAttentionTile == 0 && key0 + kAttentionTile <= last) {
                const int n = std::min<int32_t>(kAttentionTile, last - (key0 + kAttentionTile) + 1);
                prefetch_rows(t, t.k_head, key0 + kAttentionTile, n);
                prefetch_rows(t, t.v_head, key0 + kAttentionTile, n);
            }
        }
        amx_prepare_keys<DT, Bf16, Decode>(t, L, key0, std::min<int32_t>(kAmxKeys, last - key0 + 1), zero_row, kt, vt);
        for (int a = 0; a < L.a_tiles; ++a) {
            const int valid = std::min(16, rows - 16 * a);
            if (row_pos[16 * a + valid - 1] < key0) continue;  // positions grow with the row: none sees these keys
            // Scores of 16 rows x 32 keys, into s[row][key].
            Tiles::template zero<6>();
            Tiles::template zero<7>();
            if constexpr (Decode) {
                for (int h = 0; h < L.halves; ++h) {
                    Tiles::template load<5>(qt + size_t(h) * 256, 64);
                    Tiles::template load<4>(kt + size_t(h) * 256, 64);
                    Tiles::template dpbf16ps<6, 4, 5>();
                    Tiles::template load<4>(kt + (size_t(L.halves) + h) * 256, 64);
                    Tiles::template dpbf16ps<7, 4, 5>();
                }
                Tiles::template store<6>(pv, 64);        // [key 0..15][row]
                Tiles::template store<7>(pv + 256, 64);  // [key 16..31][row]
                for (int half = 0; half < 2; ++half) {
                    __m512i c[16];
                    for (int k = 0; k < 16; ++k) c[k] = _mm512_load_si512(pv + half * 256 + k * 16);
                    amx_transpose16(c);
                    for (int r = 0; r < 16; ++r) _mm512_store_si512(s + r * 32 + half * 16, c[r]);
                }
            } else {
                for (int h = 0; h < L.halves; ++h) {
                    Tiles::template load<4>(qt + (size_t(a) * L.halves + h) * 256, 64);
                    Tiles::template load<5>(kt + size_t(h) * 256, 64);
                    Tiles::template dpbf16ps<6, 4, 5>();
                    Tiles::template load<5>(kt + (size_t(L.halves) + h) * 256, 64);
                    Tiles::template dpbf16ps<7, 4, 5>();
                }
                Tiles::template store<6>(s, 128);
                Tiles::template store<7>(s + 16, 128);
            }
            // The online softmax of each row. Pass 1: scaled, masked scores (back into s); the rows'
            // maxima in one transposing reduction; the new running maxima and the 16 rows' rescaling
            // factors in one vector each. Rows past `valid` see no key (-inf, then alpha and p 0).
            __m512 rows_v[16];
            for (int r = 0; r < 16; ++r) {
                if (r >= valid) {
                    rows_v[r] = minus_inf;
                    continue;
                }
                const int allowed = row_pos[16 * a + r] - key0 + 1;  // keys key0 .. its position
                const __m512 x0 = _mm512_mask_blend_ps(amx_first_lanes(allowed), minus_inf,
                                                       _mm512_mul_ps(_mm512_load_ps(s + r * 32), scale));
                const __m512 x1 = _mm512_mask_blend_ps(amx_first_lanes(allowed - 16), minus_inf,
                                                       _mm512_mul_ps(_mm512_load_ps(s + r * 32 + 16), scale));
                _mm512_store_ps(s + r * 32, x0);
                _mm512_store_ps(s + r * 32 + 16, x1);
                rows_v[r] = _mm512_max_ps(x0, x1);
            }
            alignas(64) float m_new[16], alpha[16];
            const __m512 m_old = _mm512_loadu_ps(run_max + 16 * a);
            const __m512 m_vec = _mm512_max_ps(m_old, amx_reduce_rows<false>(rows_v));
            const __m512 alpha_vec = simd::Avx512::exp_nonpositive(_mm512_sub_ps(m_old, m_vec));
            _mm512_store_ps(m_new, m_vec);
            _mm512_store_ps(alpha, alpha_vec);
            _mm512_storeu_ps(run_max + 16 * a, m_vec);
            // Pass 2: probabilities, the P rows in bf16 (rows past `valid` zero), and the rows' sums
            // (one transposing reduction, a fixed order per row) into the running sums.
            for (int r = 0; r < 16; ++r) {
                if (r >= valid) {
                    _mm512_store_si512(pt + r * 16, _mm512_setzero_si512());
                    rows_v[r] = _mm512_setzero_ps();
                    continue;
                }
                const __m512 mv = _mm512_set1_ps(m_new[r]);
                const __m512 p0 = simd::Avx512::exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(s + r * 32), mv));
                const __m512 p1 = simd::Avx512::exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(s + r * 32 + 16), mv));
                rows_v[r] = _mm512_add_ps(p0, p1);
                _mm512_store_si512(pt + r * 16, Bf16::pairs(p0, p1));
            }
            _mm512_storeu_ps(run_sum + 16 * a,
                             _mm512_fmadd_ps(_mm512_loadu_ps(run_sum + 16 * a), alpha_vec, amx_reduce_rows<true>(rows_v)));
            // P.V, then acc = fma(acc, alpha, PV).
            if constexpr (Decode) {
                Tiles::template load<3>(pt, 64);
                amx_pv<Tiles, 3, 3>(vt, L.groups, valid, alpha, acc, acc_ld, pv);
            } else {
                Tiles::template load<4>(pt, 64);
                amx_pv<Tiles, 4, 4>(vt, L.groups, valid, alpha, acc + size_t(16 * a) * acc_ld, acc_ld, pv);
            }
        }
    }
    Tiles::release();
    for (int r = 0; r < rows; ++r) {
        float* out = t.out + size_t(r / group) * t.token_stride + size_t(r % group) * d;
        const __m512 l = _mm512_set1_ps(run_sum[r]);
        const float* arow = acc + size_t(r) * acc_ld;
        for (int c = 0; c < d; c += 16)
            _mm512_mask_storeu_ps(out + c, amx_first_lanes(d - c), _mm512_div_ps(_mm512_load_ps(arow + c), l));
    }
}

template <class Tiles, class Bf16, kv::KvDtype DT>
void amx_attend_form(const Task& t) {
    if (t.n_queries * t.group <= 16) return amx_attend_dtype<Tiles, Bf16, DT, true>(t);
    amx_attend_dtype<Tiles, Bf16, DT, false>(t);
}

// The walk for the task's cache type (f16 and bf16 are what the method takes; f32 for completeness).
template <class Tiles, class Bf16 = IntegerBf16>
void amx_attend(const Task& t) {
    if (t.row_bytes > size_t(kAmxMaxRowBytes))
        fail("amx attention: rows of {} bytes (head_dim {}) exceed {}", t.row_bytes, t.head_dim, kAmxMaxRowBytes);
    switch (t.dtype) {
        case kv::KvDtype::f16: return amx_attend_form<Tiles, Bf16, kv::KvDtype::f16>(t);
        case kv::KvDtype::bf16: return amx_attend_form<Tiles, Bf16, kv::KvDtype::bf16>(t);
        case kv::KvDtype::f32: return amx_attend_form<Tiles, Bf16, kv::KvDtype::f32>(t);
        default: fail("amx attention: KV cache type {} is not f32, f16 or bf16", kv::kv_dtype_name(t.dtype));
    }
}

}  // namespace pagoda::backend::cpu::attention_detail
