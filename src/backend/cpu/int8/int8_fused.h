// Internal: the fused int8 kernels of the quantised matmul (AVX2 / AVX-512 VNNI), included by
// matmul_int8_avx2.cpp and matmul_int8_avx512.cpp with an integer-dot policy `Dot`. Weight blocks are
// unpacked in registers straight from the GGUF bytes (no row buffer), so decode streams the weights.
//
// Per output (row r, token t) and group of 8 consecutive 32-value blocks b..b+8, with u the weight's
// codes (unsigned; Q8_0 signed), q the activation's int8 codes, d its per-block scales:
//   i_j   = dot(u_j, q_j)                    8 int32 lanes per block j, exact
//   H     = reduction tree of the i_j        one exact int32 lane per block (per 16-value half for
//                                            Q6_K, Q3_K, Q2_K) + corr, which folds a constant code
//                                            offset in exactly (-offset * sum(q))
//   acc  += f32(H) * (sc * d)                sc: the weight's 8 block scales (one FMA per 8 blocks;
//                                            per-half formats: first halves, then second halves)
// and for formats with a separate min (Q4_1, Q5_1, Q4_K, Q5_K):
//   macc += mins * s                         s = d * sum(q) of each block
// or, with a min per 16-value half (Q2_K): macc += mins0 * s0, then macc += mins1 * s1 (s0, s1:
// d * sum(q) of each block's first / second half).
// out = hsum(acc) (+ hsum(macc)). This sequence depends only on (r, t): not on n_tokens, on the
// register block sizes, on the thread split, so the result is batch invariant.
// The weight formats (the `F` of the kernels) are int8_formats.h's.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "backend/cpu/int8/fused_acts.h"
#include "backend/cpu/int8/int8_formats.h"
#include "backend/cpu/matmul/matmul_paths.h"
#include "quant/block_formats.h"
#include "quant/codebook_blocks.h"
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include "backend/cpu/int8/int8_quantize_avx512.h"
#endif

namespace pagoda::backend::cpu::detail {
namespace {

inline float hsum256(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

// Exact int32 reduction steps (unpack + add: single-uop instructions, unlike vphaddd). Per 128-bit
// half: level1(a, b) = [a0+a2, b0+b2, a1+a3, b1+b3]; level2 of two such results for blocks (i, j) and
// (k, l) = [sum of i, sum of j, sum of k, sum of l] over that half's four lanes.
inline __m256i reduce_level1(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
inline __m256i reduce_level2(__m256i p, __m256i q) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(p, q), _mm256_unpackhi_epi64(p, q));
}

// Per group of 8 blocks and output: 8 integer dots, an exact integer reduction (unpack-add tree) to one
// int32 lane per block (or per half), then one f32 convert and FMA for the 8 blocks.
template <class Dot, class F, int R, int T>
void fused_kernel(const uint8_t* const* w, const FusedActs& a, int64_t t0, float* out) {
    __m256 acc[T][R], macc[T][R];
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) acc[t][r] = macc[t][r] = _mm256_setzero_ps();
    const int64_t n_groups = (a.nb + 7) / 8;
    for (int64_t g = 0; g < n_groups; ++g) {
        const int n = int(std::min<int64_t>(8, a.nb - g * 8));
        __m256 sc0[R], sc1[R], mn[R], mn1[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) sc1[r] = mn[r] = mn1[r] = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) F::scales(w[r], g, n, sc0[r], sc1[r], mn[r], mn1[r]);
        __m256i pend[T][R], x[T][R];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            __m256i u0[R], u1[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                u0[r] = 2 * p < n ? Dot::template prepare_codes<F::is_signed>(F::codes(w[r], g, 2 * p)) : _mm256_setzero_si256();
                u1[r] = 2 * p + 1 < n ? Dot::template prepare_codes<F::is_signed>(F::codes(w[r], g, 2 * p + 1)) : _mm256_setzero_si256();
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int8_t* q = a.q + (t0 + t) * a.cols + g * 256 + 64 * p;
                const __m256i q0 = 2 * p < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)) : _mm256_setzero_si256();
                const __m256i q1 = 2 * p + 1 < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)) : _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    const __m256i z = _mm256_setzero_si256();
                    const __m256i h = reduce_level1(Dot::template dot<F::is_signed>(z, u0[r], q0),
                                                    Dot::template dot<F::is_signed>(z, u1[r], q1));
                    if (p % 2 == 0) pend[t][r] = h;
                    else if (p == 1) x[t][r] = reduce_level2(pend[t][r], h);
                    else {
                        // x: halves of blocks 0-3 (first halves low, second halves high); y: blocks 4-7.
                        const __m256i y = reduce_level2(pend[t][r], h);
                        __m256i h0 = _mm256_permute2x128_si256(x[t][r], y, 0x20);
                        __m256i h1 = _mm256_permute2x128_si256(x[t][r], y, 0x31);
                        const int64_t tg = (t0 + t) * a.nbp + g * 8;
                        const __m256 dx = _mm256_loadu_ps(a.d + tg);
                        const int32_t* c = a.corr ? a.corr + tg * 2 : nullptr;
                        if constexpr (F::per_half) {
                            if (c) {
                                h0 = _mm256_add_epi32(h0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
                                h1 = _mm256_add_epi32(h1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 8)));
                            }
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h0), _mm256_mul_ps(sc0[r], dx), acc[t][r]);
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h1), _mm256_mul_ps(sc1[r], dx), acc[t][r]);
                        } else {
                            __m256i sum = _mm256_add_epi32(h0, h1);
                            if (c) sum = _mm256_add_epi32(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
                            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(sc0[r], dx), acc[t][r]);
                        }
                        if constexpr (F::has_min && F::per_half) {
                            macc[t][r] = _mm256_fmadd_ps(mn[r], _mm256_loadu_ps(a.sh + tg * 2), macc[t][r]);
                            macc[t][r] = _mm256_fmadd_ps(mn1[r], _mm256_loadu_ps(a.sh + tg * 2 + 8), macc[t][r]);
                        } else if constexpr (F::has_min) {
                            macc[t][r] = _mm256_fmadd_ps(mn[r], _mm256_loadu_ps(a.s + tg), macc[t][r]);
                        }
                    }
                }
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r)
            out[t * R + r] = F::has_min ? hsum256(acc[t][r]) + hsum256(macc[t][r]) : hsum256(acc[t][r]);
}

template <class Dot, class F, int R, int T>
void fused_dispatch(int tokens, const uint8_t* const* w, const FusedActs& a, int64_t t0, float* out) {
    if constexpr (T > 1) {
        if (tokens < T) return fused_dispatch<Dot, F, R, T - 1>(tokens, w, a, t0, out);
    }
    fused_kernel<Dot, F, R, T>(w, a, t0, out);
}

// Storage of FusedActs, reused across calls by each calling thread.
struct FusedBuffers {
    std::vector<int8_t> q;
    std::vector<float> d, s, sh;
    std::vector<int32_t> corr;
};

// One token's activations, quantised as int8_operands.h specifies (bitwise the same values as
// quantize_activations: the same f32 max, scale, product and round-to-nearest-even conversion), with
// the per-block operands of the fused kernels written in the same pass: d, s = d*sum(first half) +
// d*sum(second half), sh = the two terms apart (when not null), and corr = -offset * sum(q) per block
// (per half when per_half); s may be null (not wanted); and, when `sums` is not null, the exact int32 sums of q over each block's
// two halves (sums[2b], sums[2b+1]: what s, sh and corr are made of, for activations quantised ahead
// of their matmuls).
inline void quantize_token_fused(const float* x, int64_t nb, int64_t nbp, int offset, bool per_half, int8_t* q,
                                 float* d, float* s, float* sh, int32_t* corr, int32_t* sums = nullptr) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t b = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    // Whole groups of 16 blocks with the per-block scalars in vector lanes (int8_quantize_avx512.h);
    // the same values as the loop below.
    for (; b + 16 <= nb; b += 16)
        quantize_blocks16_avx512(x + b * 32, b, offset, per_half, q + b * 32, d, s, sh, corr, sums);
#endif
    for (; b < nb; ++b) {
        const float* xb = x + b * 32;
        __m256 v[4];
        for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float scale = amax / 127.f;
        const __m256 inv = _mm256_set1_ps(amax > 0 ? 127.f / amax : 0.f);
        __m256i iv[4];
        for (int i = 0; i < 4; ++i) {
            iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));  // MXCSR default: nearest even
            iv[i] = _mm256_max_epi32(_mm256_min_epi32(iv[i], _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
        }
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), _mm256_permutevar8x32_epi32(p, perm));
        auto hsum_i = [](__m256i a) {
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
            return _mm_cvtsi128_si32(h);
        };
        const int32_t h0 = hsum_i(_mm256_add_epi32(iv[0], iv[1])), h1 = hsum_i(_mm256_add_epi32(iv[2], iv[3]));
        if (sums) {
            sums[2 * b] = h0;
            sums[2 * b + 1] = h1;
        }
        d[b] = scale;
        if (s) s[b] = scale * float(h0) + scale * float(h1);
        if (sh) {
            sh[b / 8 * 16 + b % 8] = scale * float(h0);
            sh[b / 8 * 16 + 8 + b % 8] = scale * float(h1);
        }
        if (offset) {
            int32_t* c = corr + b / 8 * 16 + b % 8;
            if (per_half) {
                c[0] = -offset * h0;
                c[8] = -offset * h1;
            } else {
                c[0] = -offset * (h0 + h1);
            }
        }
    }
    for (b = nb; b < nbp; ++b) {
        d[b] = 0.f;
        if (s) s[b] = 0.f;
        if (sums) sums[2 * b] = sums[2 * b + 1] = 0;
        if (sh) sh[b / 8 * 16 + b % 8] = sh[b / 8 * 16 + 8 + b % 8] = 0.f;
        if (offset) corr[b / 8 * 16 + b % 8] = corr[b / 8 * 16 + 8 + b % 8] = 0;
    }
}

// half_sums: also fill FusedActs::sh (formats with a min per 16-value half).
inline FusedActs quantize_fused(const float* x, int64_t n_tokens, int64_t cols, int offset, bool per_half,
                                FusedBuffers& buf, ThreadPool& pool, bool half_sums = false) {
    const int64_t nb = cols / 32, nbp = (nb + 7) / 8 * 8;
    buf.q.resize(size_t(n_tokens * cols));
    buf.d.resize(size_t(n_tokens * nbp));
    buf.s.resize(size_t(n_tokens * nbp));
    if (half_sums) buf.sh.resize(size_t(n_tokens * nbp * 2));
    if (offset) buf.corr.assign(size_t(n_tokens * nbp * 2), 0);
    auto one = [&](int t, int) {
        quantize_token_fused(x + t * cols, nb, nbp, offset, per_half, buf.q.data() + t * cols, buf.d.data() + t * nbp,
                             buf.s.data() + t * nbp, half_sums ? buf.sh.data() + t * nbp * 2 : nullptr,
                             offset ? buf.corr.data() + t * nbp * 2 : nullptr);
    };
    if (n_tokens * cols >= 65536) pool.run(int(n_tokens), one);
    else for (int t = 0; t < int(n_tokens); ++t) one(t, 0);
    return FusedActs{buf.q.data(), buf.d.data(), buf.s.data(), half_sums ? buf.sh.data() : nullptr,
                     offset ? buf.corr.data() : nullptr, cols, nb, nbp};
}

template <class Dot, class F, int R, int T>
void fused_rows(const WeightView& w, const FusedActs& acts, int64_t n_tokens, float* y, ThreadPool& pool,
                int64_t mc) {
    const int64_t rb_bytes = row_bytes(w);
    const auto* wdata = static_cast<const uint8_t*>(w.data);
    mc = std::max<int64_t>(R, mc / R * R);
    const int64_t n_tasks = (w.rows + mc - 1) / mc;
    pool.run(int(n_tasks), [&](int task, int) {
        const int64_t r0 = task * mc, r1 = std::min(w.rows, r0 + mc);
        for (int64_t rbase = r0; rbase < r1; rbase += R) {
            const int rr = int(std::min<int64_t>(R, r1 - rbase));
            const uint8_t* wp[R];
            // Missing rows of a partial block repeat the first row; their results are discarded.
            for (int r = 0; r < R; ++r) wp[r] = wdata + (rbase + (r < rr ? r : 0)) * rb_bytes;
            float out[T * R];
            for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
                const int tt = int(std::min<int64_t>(T, n_tokens - t0));
                fused_dispatch<Dot, F, R, T>(tt, wp, acts, t0, out);
                for (int t = 0; t < tt; ++t)
                    for (int r = 0; r < rr; ++r) y[(t0 + t) * w.rows + rbase + r] = out[t * R + r];
            }
        }
    });
}

template <class Dot, class F>
void fused_matmul_fmt(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                      const GemmTiles& tiles) {
    // Read by every worker, rebuilt per call; thread_local only avoids reallocating each call.
    thread_local FusedBuffers buf;
    const int offset = F::is_signed ? Dot::signed_offset : F::offset;
    const FusedActs acts = quantize_fused(x, n_tokens, w.cols, offset, F::per_half, buf, pool, F::per_half && F::has_min);
    // The register block differs between decode and prefill; the per-output operations do not.
    if (n_tokens == 1) fused_rows<Dot, F, Dot::R1, 1>(w, acts, n_tokens, y, pool, tiles.mc);
    else fused_rows<Dot, F, Dot::R, Dot::T>(w, acts, n_tokens, y, pool, tiles.mc);
}

template <class Dot>
void fused_matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                  const GemmTiles& tiles) {
    switch (w.type) {
        case gguf::GgmlType::Q8_0: return fused_matmul_fmt<Dot, FmtQ8_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_0: return fused_matmul_fmt<Dot, FmtQ4_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_1: return fused_matmul_fmt<Dot, FmtQ4_1>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_0: return fused_matmul_fmt<Dot, FmtQ5_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_1: return fused_matmul_fmt<Dot, FmtQ5_1>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q2_K: return fused_matmul_fmt<Dot, FmtQ2_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q3_K: return fused_matmul_fmt<Dot, FmtQ3_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_K: return fused_matmul_fmt<Dot, FmtQ4_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_K: return fused_matmul_fmt<Dot, FmtQ5_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q6_K: return fused_matmul_fmt<Dot, FmtQ6_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ4_NL: return fused_matmul_fmt<Dot, FmtIQ4_NL>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ4_XS: return fused_matmul_fmt<Dot, FmtIQ4_XS>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::MXFP4: return fused_matmul_fmt<Dot, FmtMXFP4>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_XXS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_XXS, 66>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_XS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_XS, 74>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ2_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ2_S, 82>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ3_XXS: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ3_XXS, 98>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ3_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ3_S, 110>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ1_S: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ1_S, 50>>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::IQ1_M: return fused_matmul_fmt<Dot, FmtGrid<gguf::GgmlType::IQ1_M, 56>>(w, x, n_tokens, y, pool, tiles);
        default: fail("matmul: no int8 kernel for {}", gguf::type_name(uint32_t(w.type)));
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
