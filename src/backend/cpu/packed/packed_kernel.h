// Internal: the packed int8 panel kernel (layout: matmul_paths.h) written once over a register
// traits type V, included by matmul_packed_avx512.cpp (vpdpbusd, ymm / zmm) and matmul_packed_avx2.cpp
// (vpmaddubsw + vpmaddwd, ymm). Both compute each row's exact int32 block sum (so every V gives the
// same integers) and then the same per-lane float sequence, in block order, for every (row, token):
//   acc = fma(f32(isum + corr), sc * d_x, acc)
// Q4_K / Q5_K: sc = f32(scale byte) * d, and a second accumulator macc = fma(-(f32(min byte) * dmin),
// s, macc) with s as quantize_fused makes it (d_x * sum of each half's q, added); output acc + macc.
// Q6_K: two exact sums per block (one per 16-value half, each with its corr) and two FMAs with their
// scales f32(int8 scale) * d. Q4_1: unsigned codes, sc = d, and macc = fma(m, s, macc) with its
// minimum m. IQ4_NL / IQ4_XS / MXFP4: their codebook values + 128 (looked up from the panels'
// nibbles) multiplied as Q8_0's codes; sc = d, f32(ls - 32) * d, or 2^(e - 128). The result therefore depends only on (row, token): not on V, P, T, the thread split or
// the step's size (batch invariance), and the AVX2 and AVX-512 kernels agree bitwise.
// V provides: F / I (float / int vectors), kPanels (panels per register), kRegisters (the ISA's vector
// registers: 16 or 32), join, bcast, set1, zero_i, add, srai4, cvt on I, and the float operations of
// the simd traits it derives from (simd/avx2.h, simd/avx512.h: zero, set1, add, mul, fma, fnma, store);
// dot<Signed>(acc, u, x) += the exact 4-byte products of u (unsigned) and x (signed) per int32 lane;
// kQ8Signed: Q8_0's codes (stored + 128) are multiplied as signed bytes by dot<true> itself, with no
// correction term (quantise Q8_0 with offset 0 then: packed_offset); kHighInPlace: 16 x a 4-bit code
// may enter dot (no 16-bit saturation);
// kPairSums: dot_pairs<n>(acc, u, x) adds the products of n code vectors as 16-bit pair sums before
// widening them once — exact where n x 2 x max code x 127 < 32768 (n = 8 for the 4-bit codes <= 15,
// 4 for Q5_K's <= 31, 2 for Q6_K's <= 63), so the integers are dot's.
// Internal linkage: each ISA file compiles its own copy with its own flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/int8/int8_fused.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "backend/cpu/matmul/weight_prefetch.h"
#include "backend/cpu/packed/packed_panel.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::detail {
namespace {

inline __m256i bcast32(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Steps of at most this many tokens (decode, batched decode) split the panels into one contiguous
// range per thread: they stream the weights from memory, and one sequential stream per core is what
// the hardware prefetchers follow (interleaved small tasks measured at half the bandwidth).
constexpr int64_t kStreamTokens = 16;

// The 256-bit operations every ymm trait shares (one panel per register): simd::Avx2's float ones
// and the int32 ones here; a trait adds its flags and its dot (and dot_pairs).
struct YmmOps : simd::Avx2 {
    using F = V;
    using I = __m256i;
    static constexpr int kPanels = 1;
    using simd::Avx2::add;
    using simd::Avx2::set1;
    static I join(const __m256i* parts) { return parts[0]; }
    static F join(const __m256* parts) { return parts[0]; }
    static I bcast(const int8_t* p) { return bcast32(p); }
    static I set1(int32_t v) { return _mm256_set1_epi32(v); }
    static I zero_i() { return _mm256_setzero_si256(); }
    static I add(I a, I b) { return _mm256_add_epi32(a, b); }
    static I srai4(I a) { return _mm256_srai_epi32(a, 4); }
    static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
};

// Decode kernels request each line one kernel call ahead: block b of every panel of the group of P
// panels after this one (the panels of a range are contiguous, so that is one group's bytes ahead).
// A call reads its P panels side by side, so a fixed distance within a panel (it was 2 KiB) left the
// first 2 KiB of each call's later panels to the hardware prefetchers: 30 % of a 768-column Q4_0
// call. Ice Lake server, 2 cores, from memory: 768-column Q4_0 and Q6_K matrices +20-45 % (14-16 ->
// 19-22 GB/s), 2048 columns +5-10 %; the 2 KiB distance had itself gained 10-15 % per core over
// none. Into L1 or into L2 (weight_prefetch.h): on AMD Zen 4 a call ahead (13-35 KiB of panels)
// into its 32 KiB L1 evicted the lines in use; into L2, one core from memory, 2048 columns: Q4_K
// 16.7 -> 26.0 GB/s, Q6_K 16.5 -> 31.4, Q8_0 18.6 -> 21.8, Q4_0 18.0 -> 24.0 (half a call ahead
// was slower than either: it requests the call's own second panel). Passes of 8 tokens (steps of
// 5-16 tokens: batched decode) request ahead too, since they stream like decode (Zen 4, one core from
// memory, 2048 columns: 8 tokens Q8_0 8.6 -> 17.2 GB/s, Q4_0 6.8 -> 10.4, Q4_K 6.1 -> 9.4, Q6_K
// 7.2 -> 12.0, each now at its cache-resident rate; 16 tokens Q8_0 6.0 -> 9.2, Q4_K 3.6 -> 4.9).

// Whether the trait V reads a block of its kPanels panels at once, joined (V::decode_joined, with
// decode_panel_block's codes and scales for each panel); else each panel is decoded on ymm and joined.
template <class V>
constexpr bool kJoinedDecode = requires { requires V::kJoinedDecode; };

// out: [T][P][8] floats (token t, panel p, row of the panel). L2: the prefetch hint (weight_prefetch.h).
// stream: the step streams its weights (at most kStreamTokens tokens): passes of more than 4 tokens
// request lines ahead too (else only passes of up to 4 tokens do).
template <Fmt F, int P, int T, class V, bool L2>
void packed_kernel(const uint8_t* const* panels, const FusedActs& a, int64_t t0, float* out, int64_t prefetch_ahead,
                   bool stream) {
    using PF = PanelFormat<F>;
    constexpr bool kq = PF::kq, q6 = PF::q6, q41 = PF::q41, has_min = PF::has_min;
    constexpr int64_t pbb = PF::pbb;
    static_assert(P % V::kPanels == 0);
    constexpr int W = P / V::kPanels;  // wide registers per token
    // 4-bit codes without extra bits: the high nibbles can stay in place (16 x code, a byte <= 240)
    // and their exact dot products be divided by 16 once per block (an arithmetic shift of an exact
    // multiple of 16: the same integer sum). Saves a shift per code vector and costs one per token
    // and register, so it pays where few tokens share the unpacked codes (decode).
    constexpr bool high_in_place = PF::may_keep_high_in_place && V::kHighInPlace && T * W < 4 * P;
    constexpr bool is_signed = PF::signed_codes && V::kQ8Signed;  // codes multiplied as signed bytes, no corr
    constexpr bool uses_corr = PF::code_offset != 0 && !is_signed;
    // A block sum of dot products is split over two chains (added once) to shorten its dependency
    // chain; from 8 sums a pass on there are enough independent chains without, and the add is saved
    // (the plain dot path only: the pair sums and the high nibbles in place keep their two parts).
    constexpr bool kOneChain = T * W >= 8 && !high_in_place && !V::kPairSums;
    typename V::F acc[T][W], macc[T][W];
    for (int t = 0; t < T; ++t)
        for (int p = 0; p < W; ++p) acc[t][p] = macc[t][p] = V::zero();
    // Panels decoded at a time. Decode with 16 vector registers (AVX2) takes one register's panels at
    // a time: two panels' 16 code vectors beside the 8 activation groups spilled to the stack
    // (measured on Zen 1, one core, from cache: Q4_0 6.4 -> 7.4 GB/s, Q4_K 5.8 -> 6.0, Q8_0 equal).
    // The K-quants do so with 32 registers too: their scale and min unpacking beside two panels'
    // codes spilled the converted scales (measured on a Xeon with AMX, one core: from cache Q4_K
    // 31.8 -> 36.4 GB/s, Q6_K 31.1 -> 33.8; a 32000 x 768 Q5_K matrix from L3 21.3 -> 24.9; Q4_0
    // fell 43.8 -> 40.2 that way, so the formats without per-block scale unpacking keep both panels).
    constexpr int G = T == 1 && (V::kRegisters < 32 || kq || q6) ? V::kPanels : P;
    constexpr int WG = G / V::kPanels;  // wide registers per token and group
    SuperScales super[P] = {};  // K-quants: each panel's current super-block d and dmin, converted once per 8 blocks
    for (int64_t b = 0; b < a.nb; ++b) {
#pragma GCC unroll 4
        for (int g = 0; g < P; g += G) {
            const uint8_t* pb[G];
            const uint8_t* sbp[G];
#pragma GCC unroll 4
            for (int p = 0; p < G; ++p) {
                pb[p] = panel_block<F>(panels[g + p], b, a.nb, sbp[p]);
                if (T <= 4 || stream) {  // decode and small batches stream; prefill (8 tokens a pass) computes
                    // L2 (weight_prefetch.h): a call ahead is more than L1 holds beside this call's lines on some machines.
#pragma GCC unroll 4
                    for (int64_t l = 0; l < pbb; l += 64)
                        _mm_prefetch(reinterpret_cast<const char*>(pb[p] + prefetch_ahead + l), L2 ? _MM_HINT_T1 : _MM_HINT_T0);
                    if constexpr (PF::super)  // the super-block's head (scales), before its first block
                        if (b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(sbp[p] + prefetch_ahead), L2 ? _MM_HINT_T1 : _MM_HINT_T0);
                }
            }
            if constexpr (kq)
                if (b % 8 == 0)
#pragma GCC unroll 4
                    for (int p = 0; p < G; ++p) super[g + p] = super_scales(sbp[p]);
            typename V::I cw[WG][8];
            typename V::F scw[WG], mnw[WG];  // Q6_K: scales of the first and of the last 16 values
            if constexpr (kJoinedDecode<V>) {  // the trait reads its panels' bytes joined (packed_panel_zmm.h)
#pragma GCC unroll 4
                for (int p = 0; p < WG; ++p)
                    V::template decode_joined<F, high_in_place>(pb + p * V::kPanels, sbp + p * V::kPanels, cw[p], scw[p], mnw[p],
                                                                  super + g + p * V::kPanels);
            } else {
                __m256i c[G][8];
                __m256 sc[G], mn[G];
#pragma GCC unroll 4
                for (int p = 0; p < G; ++p) decode_panel_block<F, high_in_place>(pb[p], sbp[p], c[p], sc[p], mn[p], super + g + p);
#pragma GCC unroll 4
                for (int p = 0; p < WG; ++p) {
#pragma GCC unroll 8
                    for (int k = 0; k < 8; ++k) {
                        __m256i parts[V::kPanels];
                        for (int j = 0; j < V::kPanels; ++j) parts[j] = c[p * V::kPanels + j][k];
                        cw[p][k] = V::join(parts);
                    }
                    __m256 sp[V::kPanels], mp[V::kPanels];
                    for (int j = 0; j < V::kPanels; ++j) sp[j] = sc[p * V::kPanels + j], mp[j] = mn[p * V::kPanels + j];
                    scw[p] = V::join(sp);
                    mnw[p] = V::join(mp);
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int8_t* q = a.q + (t0 + t) * a.cols + b * 32;
                const int64_t tb = (t0 + t) * a.nbp + b;
                // A code offset is folded into corr, which quantize_fused then always makes (packed_offset).
                const int32_t* cp = uses_corr ? a.corr + (t0 + t) * a.nbp * 2 + b / 8 * 16 + b % 8 : nullptr;
                int32_t corr = uses_corr ? cp[0] : 0, corr1 = q6 ? cp[8] : 0;
                // Passes of many tokens are bound by zmm loads (one broadcast per dot): their offsets
                // enter through a general register (a broadcast on the shuffle port), not as one
                // more broadcast load. Few tokens a pass: the load, which leaves the port to the dots.
                if constexpr (T > 4) asm("" : "+r"(corr), "+r"(corr1));
                const typename V::F dx = V::set1(a.d[tb]);
                typename V::I x[8];
#pragma GCC unroll 8
                for (int k = 0; k < 8; ++k) x[k] = V::bcast(q + 4 * k);
#pragma GCC unroll 4
                for (int p = 0; p < WG; ++p) {
                    const int pw = g / V::kPanels + p;  // the accumulators' register
                    if constexpr (q6) {
                        // One exact sum per 16-value half (its own scale): groups 0-3 and 4-7.
                        typename V::I i0 = V::set1(corr), i1 = V::set1(corr1);
                        if constexpr (V::kPairSums) {  // codes <= 63: two pair sums fit int16
                            i0 = V::add(V::template dot_pairs<2>(i0, cw[p], x), V::template dot_pairs<2>(V::zero_i(), cw[p] + 2, x + 2));
                            i1 = V::add(V::template dot_pairs<2>(i1, cw[p] + 4, x + 4), V::template dot_pairs<2>(V::zero_i(), cw[p] + 6, x + 6));
                        } else {
#pragma GCC unroll 4
                            for (int k = 0; k < 4; ++k) {
                                i0 = V::template dot<is_signed>(i0, cw[p][k], x[k]);
                                i1 = V::template dot<is_signed>(i1, cw[p][k + 4], x[k + 4]);
                            }
                        }
                        acc[t][pw] = V::fma(V::cvt(i0), V::mul(scw[p], dx), acc[t][pw]);
                        acc[t][pw] = V::fma(V::cvt(i1), V::mul(mnw[p], dx), acc[t][pw]);
                        continue;
                    }
                    typename V::I i0 = V::set1(corr), i1 = V::zero_i();
                    if constexpr (V::kPairSums && !is_signed && PF::may_keep_high_in_place) {
                        i0 = V::template dot_pairs<8>(i0, cw[p], x);  // codes <= 15: all eight pair sums fit int16
                    } else if constexpr (V::kPairSums && !is_signed) {  // codes <= 31: four pair sums fit int16
                        i0 = V::template dot_pairs<4>(i0, cw[p], x);
                        i1 = V::template dot_pairs<4>(i1, cw[p] + 4, x + 4);
                    } else if constexpr (high_in_place) {
#pragma GCC unroll 4
                        for (int k = 0; k < 4; ++k) {
                            i0 = V::template dot<is_signed>(i0, cw[p][k], x[k]);
                            i1 = V::template dot<is_signed>(i1, cw[p][k + 4], x[k + 4]);
                        }
                        i1 = V::srai4(i1);
                    } else if constexpr (kOneChain) {
#pragma GCC unroll 8
                        for (int k = 0; k < 8; ++k) i0 = V::template dot<is_signed>(i0, cw[p][k], x[k]);
                    } else {
#pragma GCC unroll 4
                        for (int k = 0; k < 8; k += 2) {
                            i0 = V::template dot<is_signed>(i0, cw[p][k], x[k]);
                            i1 = V::template dot<is_signed>(i1, cw[p][k + 1], x[k + 1]);
                        }
                    }
                    const typename V::F f = V::cvt(kOneChain ? i0 : V::add(i0, i1));
                    acc[t][pw] = V::fma(f, V::mul(scw[p], dx), acc[t][pw]);
                    if constexpr (kq) macc[t][pw] = V::fnma(mnw[p], V::set1(a.s[tb]), macc[t][pw]);
                    if constexpr (q41) macc[t][pw] = V::fma(mnw[p], V::set1(a.s[tb]), macc[t][pw]);
                }
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int p = 0; p < W; ++p)
            V::store(out + (t * W + p) * 8 * V::kPanels, has_min ? V::add(acc[t][p], macc[t][p]) : acc[t][p]);
}

template <Fmt F, int P, int T, class V>
void packed_dispatch(int tokens, const uint8_t* const* panels, const FusedActs& a, int64_t t0, float* out,
                     int64_t prefetch_ahead, bool l2, bool stream) {
    if constexpr (T > 1) {
        if (tokens < T) return packed_dispatch<F, P, T - 1, V>(tokens, panels, a, t0, out, prefetch_ahead, l2, stream);
    }
    if (!l2) return packed_kernel<F, P, T, V, false>(panels, a, t0, out, prefetch_ahead, stream);
    packed_kernel<F, P, T, V, true>(panels, a, t0, out, prefetch_ahead, stream);
}

// Copies a call's output tile (out: [token][P panels][8 rows]) for tt tokens from first_token on into
// y ([token][y_rows]): the pp panels from panel pbase. Where all P are whole they are P * 8 consecutive
// rows: one fixed-size copy per token (a variable-length memcpy per panel was a libc call each, 10 %
// of a 512-token Q4_0 matmul on Ice Lake).
template <int P>
inline void store_panel_rows(const float* out, int tt, float* y, int64_t y_rows, int64_t first_token, int64_t pbase, int pp) {
    const bool whole = pp == P && (pbase + P) * kPanelRows <= y_rows;
    for (int t = 0; t < tt; ++t) {
        float* yt = y + (first_token + t) * y_rows + pbase * kPanelRows;
        if (whole) {
            std::memcpy(yt, out + t * P * kPanelRows, size_t(P) * kPanelRows * sizeof(float));
            continue;
        }
        for (int p = 0; p < pp; ++p) {
            const int valid = int(std::min<int64_t>(kPanelRows, y_rows - (pbase + p) * kPanelRows));
            std::memcpy(yt + p * kPanelRows, out + (t * P + p) * kPanelRows, size_t(valid) * sizeof(float));
        }
    }
}

template <Fmt F, int P, int T, class V>
void packed_rows(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                 int64_t mc) {
    const WeightView& v = w.source();
    const int64_t panel_bytes = packed_panel_bytes(v.type, acts.nb);
    const int64_t n_panels = (v.rows + kPanelRows - 1) / kPanelRows;
    const int64_t prefetch_ahead = P * panel_bytes;  // the next group's panels (kernel comment)
    const bool l2 = weight_prefetch() == WeightPrefetch::l2, stream = n_tokens <= kStreamTokens;
    // Decode streams the weights from memory: one contiguous range of panels per thread keeps each
    // core on a single sequential stream that the hardware prefetchers follow (interleaved small
    // tasks measured at half the bandwidth), with chunks stolen from the back when a core falls
    // behind (ThreadPool::run_streams). Prefill is compute bound: small tasks balance better.
    auto panels_from = [&](int64_t p0, int64_t p1) {
        for (int64_t pbase = p0; pbase < p1; pbase += P) {
            const int pp = int(std::min<int64_t>(P, p1 - pbase));
            const uint8_t* panels[P];
            // Missing panels of a partial group repeat the first; their results are discarded.
            for (int p = 0; p < P; ++p) panels[p] = w.data() + (pbase + (p < pp ? p : 0)) * panel_bytes;
            alignas(64) float out[T * P * 8];
            for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
                const int tt = int(std::min<int64_t>(T, n_tokens - t0));
                packed_dispatch<F, P, T, V>(tt, panels, acts, t0, out, prefetch_ahead, l2, stream);
                store_panel_rows<P>(out, tt, y, v.rows, t0, pbase, pp);
            }
        }
    };
    if (n_tokens <= kStreamTokens) {
        const int64_t groups = (n_panels + P - 1) / P;  // the unit: P panels, one kernel call
        pool.run_streams(groups, [&](int64_t g0, int64_t g1, int) { panels_from(g0 * P, std::min(n_panels, g1 * P)); });
        return;
    }
    const int64_t per_task = std::max<int64_t>(1, mc / kPanelRows / P) * P;  // panels per prefill task
    pool.run(int((n_panels + per_task - 1) / per_task), [&](int task, int) {
        const int64_t p0 = task * per_task;
        panels_from(p0, std::min(n_panels, p0 + per_task));
    });
}

// No kernel of its own for steps of more than kStreamTokens tokens (packed_by_type's Wide; where there
// is one, it takes the steps of at least wide_min_tokens() tokens).
struct NoWide {};

template <Fmt F, class Decode, class Prefill, int PrefillP, int PrefillT, class Wide>
void packed_matmul(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                   int64_t mc) {
    // One token: two panels on ymm share each broadcast activation group and the per-block scalars
    // (measured +20-60 % per core over one panel on Ice Lake; 4 panels, or zmm joins, did no better).
    if (n_tokens == 1) return packed_rows<F, 2, 1, Decode>(w, acts, n_tokens, y, pool, mc);
    if constexpr (!std::is_same_v<Wide, NoWide>)
        if (n_tokens > kStreamTokens && n_tokens >= wide_min_tokens())  // the plan's threshold (matmul.h)
            return Wide::template matmul<F>(w, acts, n_tokens, y, pool, mc);
    packed_rows<F, PrefillP, PrefillT, Prefill>(w, acts, n_tokens, y, pool, mc);
}

// The code offset the activations are quantised with for a packed type (folded in through corr).
template <class V>
int packed_offset(gguf::GgmlType type) {
    using T = gguf::GgmlType;
    // Codes stored as weight + 128 (Q8_0, and the codebook types' looked-up values): none where V
    // multiplies them as signed bytes.
    if (type == T::Q8_0 || type == T::IQ4_NL || type == T::IQ4_XS || type == T::MXFP4)
        return V::kQ8Signed ? 0 : PanelFormat<Fmt::q8_0>::code_offset;
    return type == T::Q4_0   ? PanelFormat<Fmt::q4_0>::code_offset
           : type == T::Q5_0 ? PanelFormat<Fmt::q5_0>::code_offset
           : type == T::Q6_K ? PanelFormat<Fmt::q6_k>::code_offset
                             : 0;
}

// FusedActs of activations quantised ahead (PrequantizedLayout): q and d as they are, s and the type's
// corrections rebuilt from the exact half sums with quantize_token_fused's arithmetic.
inline FusedActs prequantized_acts(const PrequantizedLayout& l, int64_t n_tokens, int64_t cols, int offset,
                                   bool per_half, FusedBuffers& buf) {
    buf.s.resize(size_t(n_tokens * l.nbp));
    if (offset) buf.corr.assign(size_t(n_tokens * l.nbp * 2), 0);
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t b = 0; b < l.nbp; ++b) {
            const float scale = l.d[t * l.nbp + b];
            const int32_t h0 = l.sums[(t * l.nbp + b) * 2], h1 = l.sums[(t * l.nbp + b) * 2 + 1];
            buf.s[size_t(t * l.nbp + b)] = scale * float(h0) + scale * float(h1);
            if (!offset) continue;
            int32_t* c = buf.corr.data() + t * l.nbp * 2 + b / 8 * 16 + b % 8;
            if (per_half) {
                c[0] = -offset * h0;
                c[8] = -offset * h1;
            } else {
                c[0] = -offset * (h0 + h1);
            }
        }
    }
    return FusedActs{l.q, l.d, buf.s.data(), nullptr, offset ? buf.corr.data() : nullptr, cols, cols / 32, l.nbp};
}

// The packed matmul of every packed type: decode on Decode (2 panels a call), steps of a few tokens
// on Prefill (PrefillP panels x PrefillT tokens a call), and steps of more than kStreamTokens tokens
// on Wide::matmul<F> where the ISA file has one (same results: packed_kernel_wide.h).
template <class Decode, class Prefill, int PrefillP, int PrefillT, class Wide = NoWide>
void packed_by_type(const PackedWeight& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                    int64_t mc) {
    switch (w.source().type) {
        case gguf::GgmlType::Q4_0: return packed_matmul<Fmt::q4_0, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q4_1: return packed_matmul<Fmt::q4_1, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q5_0: return packed_matmul<Fmt::q5_0, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q8_0: return packed_matmul<Fmt::q8_0, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q4_K: return packed_matmul<Fmt::q4_k, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q5_K: return packed_matmul<Fmt::q5_k, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::Q6_K: return packed_matmul<Fmt::q6_k, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::IQ4_NL: return packed_matmul<Fmt::iq4_nl, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::IQ4_XS: return packed_matmul<Fmt::iq4_xs, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        case gguf::GgmlType::MXFP4: return packed_matmul<Fmt::mxfp4, Decode, Prefill, PrefillP, PrefillT, Wide>(w, acts, n_tokens, y, pool, mc);
        default: fail("matmul: no packed kernel for {}", gguf::type_name(uint32_t(w.source().type)));
    }
}

// The three entry points of an ISA file, over its trait V and its run(w, acts, n_tokens, y, pool,
// tiles): f32 rows quantised here, and rows quantised ahead (prequantize_token, then prequantized).
template <class V, class Run>
void packed_from_rows(const PackedWeight& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                      const GemmTiles& tiles, Run run) {
    const gguf::GgmlType type = w.source().type;
    thread_local FusedBuffers buf;
    const FusedActs acts = quantize_fused(x, n_tokens, w.source().cols, packed_offset<V>(type),
                                          type == gguf::GgmlType::Q6_K, buf, pool);
    run(w, acts, n_tokens, y, pool, tiles);
}

inline void prequantize_token(const float* x, int64_t t, int64_t n_tokens, int64_t cols, void* storage) {
    const PrequantizedLayout l(storage, n_tokens, cols);
    // s (and each weight type's corrections) are rebuilt from the sums per weight.
    quantize_token_fused(x, cols / 32, l.nbp, 0, false, l.q + t * cols, l.d + t * l.nbp, nullptr, nullptr, nullptr,
                         l.sums + t * 2 * l.nbp);
}

template <class V, class Run>
void packed_from_prequantized(const PackedWeight& w, const void* storage, int64_t n_tokens, float* y,
                              ThreadPool& pool, const GemmTiles& tiles, Run run) {
    const gguf::GgmlType type = w.source().type;
    const PrequantizedLayout l(const_cast<void*>(storage), n_tokens, w.source().cols);
    thread_local FusedBuffers buf;
    const FusedActs acts = prequantized_acts(l, n_tokens, w.source().cols, packed_offset<V>(type),
                                             type == gguf::GgmlType::Q6_K, buf);
    run(w, acts, n_tokens, y, pool, tiles);
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
