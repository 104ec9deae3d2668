// Internal: the fused int8 kernels of the quantised matmul (AVX2 / AVX-512 VNNI), included by
// matmul_int8_avx2.cpp and matmul_int8_avx512.cpp with an integer-dot policy `Dot`. Weight blocks are
// unpacked in registers straight from the GGUF bytes (no row buffer), so decode streams the weights.
//
// Per output (row r, token t) and 32-value activation block b, with u the weight's unsigned codes
// (or signed int8 for Q8_0), q the activation's int8 codes and d_b its scale:
//   isum  = dot(corr[t][b], u, q)            8 int32 lanes; lanes 0-3 sum the first 16 values, 4-7 the
//                                            last 16; corr folds a constant code offset in exactly
//                                            (lane 0 / lane 4 hold -offset * sum(q) of each half)
//   acc  += f32(isum) * (sv * d_b)           sv: the weight's per-half scales (one FMA per lane)
// and for formats with a separate min (Q4_1, Q4_K, Q5_K) a second 8-lane accumulator over blocks:
//   macc += mins[b..b+8) * s[t][b..b+8)      s = d_b * sum(q over the block)
// out = hsum(acc) + hsum(macc). This sequence depends only on (r, t): not on n_tokens, on the
// register block sizes, on the thread split, so the result is batch invariant.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/int8_operands.h"
#include "kernels/cpu/matmul_paths.h"
#include "quant/block_formats.h"

namespace pagoda::kernels::detail {
namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
inline __m256i high_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)); }

// 16 bytes of Q4_0/Q4_1 nibbles -> 32 codes in value order (low nibbles, then high nibbles).
inline __m256i unpack_nibbles16(const uint8_t* qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return low_nibbles(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)));
}

// Format traits: group_bytes / group_blocks (a group is one block, or a K-quant super-block of 8),
// Scales prepare(group), unpack(group, scales, j) -> codes of 32-block j, scale(scales, j) -> sv,
// and for has_min formats min(scales, j). offset: the code offset folded into corr (signed formats
// let the Dot policy choose it).
struct FmtQ8_0 {
    static constexpr int group_bytes = 34, group_blocks = 1, offset = 0;
    static constexpr bool is_signed = true, has_min = false;
    struct Scales { float d; };
    static Scales prepare(const uint8_t* g) { return {h2f(g)}; }
    static __m256i unpack(const uint8_t* g, const Scales&, int) { return load256(g + 2); }
    static __m256 scale(const Scales& s, int) { return _mm256_set1_ps(s.d); }
    static float min(const Scales&, int) { return 0.f; }
};

struct FmtQ4_0 {
    static constexpr int group_bytes = 18, group_blocks = 1, offset = 8;
    static constexpr bool is_signed = false, has_min = false;
    struct Scales { float d; };
    static Scales prepare(const uint8_t* g) { return {h2f(g)}; }
    static __m256i unpack(const uint8_t* g, const Scales&, int) { return unpack_nibbles16(g + 2); }
    static __m256 scale(const Scales& s, int) { return _mm256_set1_ps(s.d); }
    static float min(const Scales&, int) { return 0.f; }
};

struct FmtQ4_1 {
    static constexpr int group_bytes = 20, group_blocks = 1, offset = 0;
    static constexpr bool is_signed = false, has_min = true;
    struct Scales { float d, m; };
    static Scales prepare(const uint8_t* g) { return {h2f(g), h2f(g + 2)}; }
    static __m256i unpack(const uint8_t* g, const Scales&, int) { return unpack_nibbles16(g + 4); }
    static __m256 scale(const Scales& s, int) { return _mm256_set1_ps(s.d); }
    static float min(const Scales& s, int) { return s.m; }
};

struct KScales { float sc[8], mn[8]; };

inline KScales k_scales(const uint8_t* g) {
    KScales s;
    const float d = h2f(g), dmin = h2f(g + 2);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        quant::k_scale_min(j, g + 4, sc, m);
        s.sc[j] = d * float(sc);
        s.mn[j] = -(dmin * float(m));
    }
    return s;
}

struct FmtQ4_K {
    static constexpr int group_bytes = 144, group_blocks = 8, offset = 0;
    static constexpr bool is_signed = false, has_min = true;
    using Scales = KScales;
    static Scales prepare(const uint8_t* g) { return k_scales(g); }
    static __m256i unpack(const uint8_t* g, const Scales&, int j) {
        const __m256i v = load256(g + 16 + 32 * (j / 2));
        return j % 2 ? high_nibbles(v) : low_nibbles(v);
    }
    static __m256 scale(const Scales& s, int j) { return _mm256_set1_ps(s.sc[j]); }
    static float min(const Scales& s, int j) { return s.mn[j]; }
};

struct FmtQ5_K {
    static constexpr int group_bytes = 176, group_blocks = 8, offset = 0;
    static constexpr bool is_signed = false, has_min = true;
    using Scales = KScales;
    static Scales prepare(const uint8_t* g) { return k_scales(g); }
    static __m256i unpack(const uint8_t* g, const Scales&, int j) {
        const __m256i v = load256(g + 48 + 32 * (j / 2));
        const __m256i lo = j % 2 ? high_nibbles(v) : low_nibbles(v);
        // Bit j of qh[l] is the fifth bit of value l of sub-block j.
        const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(load256(g + 16), _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
        return _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
    }
    static __m256 scale(const Scales& s, int j) { return _mm256_set1_ps(s.sc[j]); }
    static float min(const Scales& s, int j) { return s.mn[j]; }
};

struct FmtQ6_K {
    static constexpr int group_bytes = 210, group_blocks = 8, offset = 32;
    static constexpr bool is_signed = false, has_min = false;
    struct Scales { float sc[16]; };
    static Scales prepare(const uint8_t* g) {
        Scales s;
        const float d = h2f(g + 208);
        for (int i = 0; i < 16; ++i) s.sc[i] = d * float(int8_t(g[192 + i]));
        return s;
    }
    // 32-block j: half h = j/4 of the super-block, quarter k = j%4; low 4 bits from ql (low nibbles
    // for k < 2), 2 high bits from qh at bit 2k.
    static __m256i unpack(const uint8_t* g, const Scales&, int j) {
        const int h = j / 4, k = j % 4;
        const __m256i l = load256(g + 64 * h + 32 * (k & 1));
        const __m256i lo = k < 2 ? low_nibbles(l) : high_nibbles(l);
        const __m256i qh = _mm256_srl_epi16(load256(g + 128 + 32 * h), _mm_cvtsi32_si128(2 * k));
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4);
        return _mm256_or_si256(lo, hi);
    }
    static __m256 scale(const Scales& s, int j) {
        return _mm256_setr_m128(_mm_set1_ps(s.sc[2 * j]), _mm_set1_ps(s.sc[2 * j + 1]));
    }
    static float min(const Scales&, int) { return 0.f; }
};

inline float hsum256(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

// Activation operands laid out for the fused kernels (built once per matmul call).
struct FusedActs {
    const int8_t* q;       // [n_tokens][cols]
    const float* d;        // [n_tokens][nb]
    const float* s;        // [n_tokens][nb]   d * sum(q) of the block (min formats)
    const int32_t* corr;   // [n_tokens][nb][8] (null when the offset is 0)
    int64_t cols, nb;
};

// R rows x T tokens: out[t * R + r] for rows w[0..R) and tokens t0..t0+T.
template <class Dot, class F, int R, int T>
void fused_kernel(const uint8_t* const* w, const FusedActs& a, int64_t t0, float* const* mins, float* out) {
    __m256 acc[T][R];
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
    const int64_t n_groups = a.nb / F::group_blocks;
    for (int64_t g = 0; g < n_groups; ++g) {
        typename F::Scales sc[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) sc[r] = F::prepare(w[r] + g * F::group_bytes);
#pragma GCC unroll 8
        for (int j = 0; j < F::group_blocks; ++j) {
            const int64_t b = g * F::group_blocks + j;
            __m256i u[R];
            __m256 sv[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                u[r] = Dot::template prepare_codes<F::is_signed>(F::unpack(w[r] + g * F::group_bytes, sc[r], j));
                sv[r] = F::scale(sc[r], j);
                if constexpr (F::has_min) mins[r][b] = F::min(sc[r], j);
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int64_t tb = (t0 + t) * a.nb + b;
                const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + (t0 + t) * a.cols + b * 32));
                const __m256i c = a.corr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.corr + tb * 8))
                                         : _mm256_setzero_si256();
                const __m256 dx = _mm256_broadcast_ss(a.d + tb);
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    const __m256 f = _mm256_cvtepi32_ps(Dot::template dot<F::is_signed>(c, u[r], qv));
                    acc[t][r] = _mm256_fmadd_ps(f, _mm256_mul_ps(sv[r], dx), acc[t][r]);
                }
            }
        }
    }
    if constexpr (F::has_min) {
        __m256 macc[T][R];
        for (int t = 0; t < T; ++t)
            for (int r = 0; r < R; ++r) macc[t][r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < a.nb; b += 8) {
            const int cnt = int(std::min<int64_t>(8, a.nb - b));
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256 mv[R];
            for (int r = 0; r < R; ++r) mv[r] = _mm256_maskload_ps(mins[r] + b, m);
            for (int t = 0; t < T; ++t) {
                const __m256 sv = _mm256_maskload_ps(a.s + (t0 + t) * a.nb + b, m);
                for (int r = 0; r < R; ++r) macc[t][r] = _mm256_fmadd_ps(mv[r], sv, macc[t][r]);
            }
        }
        for (int t = 0; t < T; ++t)
            for (int r = 0; r < R; ++r) out[t * R + r] = hsum256(acc[t][r]) + hsum256(macc[t][r]);
    } else {
        for (int t = 0; t < T; ++t)
            for (int r = 0; r < R; ++r) out[t * R + r] = hsum256(acc[t][r]);
    }
}

template <class Dot, class F, int R, int T>
void fused_dispatch(int tokens, const uint8_t* const* w, const FusedActs& a, int64_t t0, float* const* mins, float* out) {
    if constexpr (T > 1) {
        if (tokens < T) return fused_dispatch<Dot, F, R, T - 1>(tokens, w, a, t0, mins, out);
    }
    fused_kernel<Dot, F, R, T>(w, a, t0, mins, out);
}

// Builds corr for a code offset: lane 0 / lane 4 of each block = -offset * sum(q) of its halves.
inline void build_corr(const QuantizedActivations& qa, int offset, std::vector<int32_t>& corr) {
    corr.assign(size_t(qa.n_tokens * qa.n_blocks * 8), 0);
    for (int64_t t = 0; t < qa.n_tokens; ++t)
        for (int64_t b = 0; b < qa.n_blocks; ++b) {
            const int8_t* q = qa.q.data() + t * qa.cols + b * 32;
            int32_t h0 = 0, h1 = 0;
            for (int i = 0; i < 16; ++i) { h0 += q[i]; h1 += q[16 + i]; }
            int32_t* c = corr.data() + (t * qa.n_blocks + b) * 8;
            c[0] = -offset * h0;
            c[4] = -offset * h1;
        }
}

template <class Dot, class F>
void fused_matmul_fmt(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                      const GemmTiles& tiles) {
    constexpr int R = Dot::R, T = Dot::T;
    // Read by every worker, rebuilt per call; thread_local only avoids reallocating each call.
    thread_local QuantizedActivations qa;
    thread_local std::vector<float> sblk;
    thread_local std::vector<int32_t> corr;
    quantize_activations(x, n_tokens, w.cols, qa, pool);
    const int64_t nb = qa.n_blocks;
    const int offset = F::is_signed ? Dot::signed_offset : F::offset;
    if (offset != 0) build_corr(qa, offset, corr);
    if constexpr (F::has_min) {
        sblk.resize(size_t(n_tokens * nb));
        for (int64_t i = 0; i < n_tokens * nb; ++i) sblk[size_t(i)] = qa.s[size_t(2 * i)] + qa.s[size_t(2 * i + 1)];
    }
    const FusedActs acts{qa.q.data(), qa.d.data(), F::has_min ? sblk.data() : nullptr,
                         offset != 0 ? corr.data() : nullptr, w.cols, nb};
    const int64_t rb_bytes = row_bytes(w);
    const auto* wdata = static_cast<const uint8_t*>(w.data);
    const int64_t mc = std::max<int64_t>(R, tiles.mc / R * R);
    const int64_t n_tasks = (w.rows + mc - 1) / mc;
    pool.run(int(n_tasks), [&](int task, int) {
        thread_local std::vector<float> min_buf;
        if (F::has_min && min_buf.size() < size_t(R * nb)) min_buf.resize(size_t(R * nb));
        const int64_t r0 = task * mc, r1 = std::min(w.rows, r0 + mc);
        for (int64_t rbase = r0; rbase < r1; rbase += R) {
            const int rr = int(std::min<int64_t>(R, r1 - rbase));
            const uint8_t* wp[R];
            float* mins[R];
            for (int r = 0; r < R; ++r) {
                // Missing rows of a partial block repeat the first row; their results are discarded.
                wp[r] = wdata + (rbase + (r < rr ? r : 0)) * rb_bytes;
                mins[r] = F::has_min ? min_buf.data() + r * nb : nullptr;
            }
            float out[T * R];
            for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
                const int tt = int(std::min<int64_t>(T, n_tokens - t0));
                fused_dispatch<Dot, F, R, T>(tt, wp, acts, t0, mins, out);
                for (int t = 0; t < tt; ++t)
                    for (int r = 0; r < rr; ++r) y[(t0 + t) * w.rows + rbase + r] = out[t * R + r];
            }
        }
    });
}

template <class Dot>
void fused_matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                  const GemmTiles& tiles) {
    switch (w.type) {
        case gguf::GgmlType::Q8_0: return fused_matmul_fmt<Dot, FmtQ8_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_0: return fused_matmul_fmt<Dot, FmtQ4_0>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_1: return fused_matmul_fmt<Dot, FmtQ4_1>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q4_K: return fused_matmul_fmt<Dot, FmtQ4_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q5_K: return fused_matmul_fmt<Dot, FmtQ5_K>(w, x, n_tokens, y, pool, tiles);
        case gguf::GgmlType::Q6_K: return fused_matmul_fmt<Dot, FmtQ6_K>(w, x, n_tokens, y, pool, tiles);
        default: fail("matmul: no int8 kernel for {}", gguf::type_name(uint32_t(w.type)));
    }
}

}  // namespace
}  // namespace pagoda::kernels::detail
