// Internal: the AVX-512 VNNI prefill kernel for packed int8 panels (layout: matmul_paths.h), used for
// steps of at least wide_min_tokens() tokens (matmul.h: 17 unless the kernel plan says more). It computes what packed_kernel.h computes — each row's
// exact int32 block sum, then per (row, token) acc = fma(f32(isum + corr), sc * d_x, acc) in block
// order, macc for the formats with a min, Q6_K's two halves in turn — so its results are bitwise the
// narrow kernel's (and the AVX2 kernel's, and the AMX tiles'): only the loop shape differs.
//
// Why a second shape. The narrow kernel joins 2 panels per zmm and walks the tokens innermost, so
// every broadcast activation group feeds one vpdpbusd; on Ice Lake server a zmm broadcast load
// issues at ~1.3 a cycle against vpdpbusd's 2 (that shape with four panels per pass left GCC 16
// code vectors beside 2 x T accumulators, and it reloaded the codes for every vpdpbusd). Here:
//   - a group of 4 panels (two zmm of 16 rows) is decoded once for all its blocks into a per-thread
//     scratch (code vectors already joined, scales beside them), not once per token pass;
//   - the activations are rearranged once per step into token groups of T, block by block, so a
//     token's 32 codes, scale and correction sit at fixed offsets from one pointer;
//   - within a block the 8 code groups are the outer loop: two code vectors are loaded and every
//     broadcast activation group feeds two vpdpbusd, into T x 2 int32 sums held in registers, and
//     the T x 2 float accumulators stay in registers across the blocks.
// Internal linkage, AVX-512 (F/BW/VL/VNNI) only: included by matmul_packed_avx512.cpp alone.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/packed/packed_kernel.h"

namespace pagoda::backend::cpu::detail {
namespace {

constexpr int kWideTokens = 6;  // tokens per pass: 12 int sums + 12 accumulators + operands fit 32 zmm
constexpr int kWidePanels = 4;  // panels per pass: two zmm of 16 rows

// One step's activations, token groups of kWideTokens (the last padded with zero tokens): q as
// [group][block][token][32], d, s and the corrections (per block, or per half for Q6_K) as
// [group][block][token].
struct WideActs {
    std::vector<int8_t> q;
    std::vector<float> d, s;
    std::vector<int32_t> c0, c1;
    int64_t nb = 0, groups = 0;
};

inline void rearrange_wide(const FusedActs& a, int64_t n_tokens, WideActs& w) {
    constexpr int T = kWideTokens;
    w.nb = a.nb;
    w.groups = (n_tokens + T - 1) / T;
    const size_t slots = size_t(w.groups * a.nb * T);
    w.q.assign(slots * 32, 0);
    w.d.assign(slots, 0.0f);
    w.s.assign(a.s ? slots : 0, 0.0f);
    w.c0.assign(a.corr ? slots : 0, 0);
    w.c1.assign(a.corr ? slots : 0, 0);
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
        const int64_t g = tok / T, t = tok % T;
        for (int64_t b = 0; b < a.nb; ++b) {
            const size_t slot = size_t((g * a.nb + b) * T + t);
            std::memcpy(w.q.data() + slot * 32, a.q + tok * a.cols + b * 32, 32);
            w.d[slot] = a.d[tok * a.nbp + b];
            if (a.s) w.s[slot] = a.s[tok * a.nbp + b];
            if (a.corr) {
                const int32_t* cp = a.corr + tok * a.nbp * 2 + b / 8 * 16 + b % 8;
                w.c0[slot] = cp[0];
                w.c1[slot] = cp[8];
            }
        }
    }
}

// A block of a decoded panel group: the 8 code vectors of each zmm (rows 0-15, then 16-31), then
// each zmm's scales and mins (as float bits).
constexpr int kWideBlockVectors = 20;
struct alignas(64) Zmm64 {
    uint8_t bytes[64];
};

template <Fmt F>
void decode_wide_group(const uint8_t* const* panels, int64_t nb, __m512i* out) {
    for (int64_t b = 0; b < nb; ++b) {
        __m256i c[kWidePanels][8];
        __m256 sc[kWidePanels], mn[kWidePanels];
        for (int p = 0; p < kWidePanels; ++p) {
            const uint8_t* sbp;
            const uint8_t* pb = panel_block<F>(panels[p], b, nb, sbp);
            decode_panel_block<F, false>(pb, sbp, c[p], sc[p], mn[p]);
        }
        __m512i* o = out + b * kWideBlockVectors;
        for (int w = 0; w < 2; ++w) {
            for (int k = 0; k < 8; ++k)
                _mm512_store_si512(o + w * 8 + k, _mm512_inserti64x4(_mm512_castsi256_si512(c[2 * w][k]), c[2 * w + 1][k], 1));
            _mm512_store_ps(o + 16 + w, _mm512_insertf32x8(_mm512_castps256_ps512(sc[2 * w]), sc[2 * w + 1], 1));
            _mm512_store_ps(o + 18 + w, _mm512_insertf32x8(_mm512_castps256_ps512(mn[2 * w]), mn[2 * w + 1], 1));
        }
    }
}

// sums[t][w] = init[t] (Init; else 0) + the exact products of code groups K0..K1-1 with token t's
// activation groups.
template <int T, int K0, int K1, bool Init>
inline void wide_sums(__m512i (&sums)[T][2], const __m512i* codes, const int8_t* q, const int32_t* init) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) sums[t][0] = sums[t][1] = Init ? _mm512_set1_epi32(init[t]) : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = K0; k < K1; ++k) {
        const __m512i c0 = _mm512_load_si512(codes + k), c1 = _mm512_load_si512(codes + 8 + k);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            int32_t v;
            std::memcpy(&v, q + t * 32 + 4 * k, 4);
            const __m512i x = _mm512_set1_epi32(v);
            sums[t][0] = _mm512_dpbusd_epi32(sums[t][0], c0, x);
            sums[t][1] = _mm512_dpbusd_epi32(sums[t][1], c1, x);
        }
    }
}

// acc[t][w] = fma(f32(sums[t][w]), scale[w] * d[t], acc[t][w])
template <int T>
inline void wide_scale_add(__m512 (&acc)[T][2], const __m512i (&sums)[T][2], const __m512i* scale, const float* d) {
    const __m512 s0 = _mm512_castsi512_ps(_mm512_load_si512(scale)), s1 = _mm512_castsi512_ps(_mm512_load_si512(scale + 1));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(d[t]);
        acc[t][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t][0]), _mm512_mul_ps(s0, dx), acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t][1]), _mm512_mul_ps(s1, dx), acc[t][1]);
    }
}

// One token group (T tokens, at the group's offset into WideActs' arrays) against one decoded panel
// group: out [T][4][8] as packed_kernel's.
template <Fmt F, int T>
void wide_tile(const __m512i* dec, const WideActs& a, int64_t g, float* out) {
    using PF = PanelFormat<F>;
    constexpr bool q6 = PF::q6, has_min = PF::has_min, kq = PF::kq;
    const int64_t base = g * a.nb * T;  // the group's first slot
    const int8_t* q = a.q.data() + base * 32;
    const float* d = a.d.data() + base;
    const float* s = has_min ? a.s.data() + base : nullptr;
    // Corrections as the narrow kernel reads them: present for the formats with a code offset (none
    // where the activations carry no corr: then the sums start at zero).
    const int32_t* c0 = !has_min && !a.c0.empty() ? a.c0.data() + base : nullptr;
    const int32_t* c1 = q6 && !a.c1.empty() ? a.c1.data() + base : nullptr;
    __m512 acc[T][2];
    for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    // The min terms accumulate in memory: their registers would not fit beside acc and the sums.
    alignas(64) float macc[has_min ? T * 32 : 16];
    if constexpr (has_min)
        for (int i = 0; i < 2 * T; ++i) _mm512_store_ps(macc + 16 * i, _mm512_setzero_ps());
    for (int64_t b = 0; b < a.nb; ++b, q += T * 32, d += T) {
        const __m512i* codes = dec + b * kWideBlockVectors;
        __m512i sums[T][2];
        if constexpr (q6) {  // one exact sum per 16-value half, each with its scale, in turn
            if (c0) wide_sums<T, 0, 4, true>(sums, codes, q, c0 + b * T);
            else wide_sums<T, 0, 4, false>(sums, codes, q, nullptr);
            wide_scale_add<T>(acc, sums, codes + 16, d);
            if (c1) wide_sums<T, 4, 8, true>(sums, codes, q, c1 + b * T);
            else wide_sums<T, 4, 8, false>(sums, codes, q, nullptr);
            wide_scale_add<T>(acc, sums, codes + 18, d);
        } else {
            if (c0) wide_sums<T, 0, 8, true>(sums, codes, q, c0 + b * T);
            else wide_sums<T, 0, 8, false>(sums, codes, q, nullptr);
            wide_scale_add<T>(acc, sums, codes + 16, d);
        }
        if constexpr (has_min) {
            const __m512 m0 = _mm512_castsi512_ps(_mm512_load_si512(codes + 18)),
                         m1 = _mm512_castsi512_ps(_mm512_load_si512(codes + 19));
            for (int t = 0; t < T; ++t) {
                const __m512 sv = _mm512_set1_ps(s[b * T + t]);
                float* m = macc + t * 32;
                if constexpr (kq) {
                    _mm512_store_ps(m, _mm512_fnmadd_ps(m0, sv, _mm512_load_ps(m)));
                    _mm512_store_ps(m + 16, _mm512_fnmadd_ps(m1, sv, _mm512_load_ps(m + 16)));
                } else {  // Q4_1: + m * s
                    _mm512_store_ps(m, _mm512_fmadd_ps(m0, sv, _mm512_load_ps(m)));
                    _mm512_store_ps(m + 16, _mm512_fmadd_ps(m1, sv, _mm512_load_ps(m + 16)));
                }
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int w = 0; w < 2; ++w) {
            __m512 r = acc[t][w];
            if constexpr (has_min) r = _mm512_add_ps(r, _mm512_load_ps(macc + t * 32 + w * 16));
            _mm512_storeu_ps(out + t * 32 + w * 16, r);
        }
}

// The prefill matmul on the wide kernel: tasks of whole panel groups (mc rows), each group decoded
// once, then every token group against it.
template <Fmt F>
void packed_rows_wide(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                      int64_t mc) {
    constexpr int T = kWideTokens, P = kWidePanels;
    count_wide_dispatch();
    const WeightView& v = w.source();
    const int64_t panel_bytes = packed_panel_bytes(v.type, acts.nb);
    const int64_t n_panels = (v.rows + kPanelRows - 1) / kPanelRows;
    thread_local WideActs calling_thread_acts;
    const WideActs& wa = calling_thread_acts;  // a reference: inside the tasks the name would be each thread's own
    rearrange_wide(acts, n_tokens, calling_thread_acts);
    const int64_t per_task = std::max<int64_t>(1, mc / kPanelRows / P) * P;
    pool.run(int((n_panels + per_task - 1) / per_task), [&](int task, int) {
        thread_local std::vector<Zmm64> dec_storage;  // 64-byte aligned elements
        dec_storage.resize(size_t(acts.nb * kWideBlockVectors));
        __m512i* dec = reinterpret_cast<__m512i*>(dec_storage.data());
        const int64_t p0 = task * per_task, p1 = std::min(n_panels, p0 + per_task);
        for (int64_t pbase = p0; pbase < p1; pbase += P) {
            const int pp = int(std::min<int64_t>(P, p1 - pbase));
            const uint8_t* panels[P];
            for (int p = 0; p < P; ++p) panels[p] = w.data() + (pbase + (p < pp ? p : 0)) * panel_bytes;
            decode_wide_group<F>(panels, acts.nb, dec);
            alignas(64) float out[T * P * kPanelRows];
            for (int64_t g = 0; g < wa.groups; ++g) {
                wide_tile<F, T>(dec, wa, g, out);
                store_panel_rows<P>(out, int(std::min<int64_t>(T, n_tokens - g * T)), y, v.rows, g * T, pbase, pp);
            }
        }
    });
}

// The Wide hook of packed_by_type (packed_kernel.h).
struct WidePrefill {
    template <Fmt F>
    static void matmul(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                       int64_t mc) {
        packed_rows_wide<F>(w, acts, n_tokens, y, pool, mc);
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::detail
