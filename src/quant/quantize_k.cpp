// The K-quant quantisers (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and the scale searches they share, each
// bit-compatible with ggml's reference (quantize.h says what that takes).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace pagoda::quant {
namespace {

// Round to nearest, ties to even, for |v| < 2^22: the rounding ggml's K-quant search uses.
int nearest_int(float v) { return int(std::nearbyint(v)); }

constexpr float kGroupMaxEps = 1e-15f;

// Least-squares asymmetric quantisation of n values to 0..nmax with per-value importance weights:
// starts from the min/max grid, then tries nstep+1 slightly different grids and keeps the one with
// the lowest weighted squared error. Returns the scale; *neg_min receives -min (min <= 0).
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep, bool abs_error = false) {
    // The error measure: weighted squared error, or (abs_error, Q2_K's) weighted absolute error.
    auto cost = [abs_error](float diff) { return abs_error ? std::fabs(diff) : diff * diff; };
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *neg_min = -min;
        return 0.f;
    }
    float iscale = float(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = uint8_t(std::max(0, std::min(nmax, l)));
        float diff = scale * float(L[i]) + min - x[i];
        best_error += weights[i] * cost(diff);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = uint8_t(l);
            float w = weights[i];
            sum_l += w * float(l);
            sum_l2 += w * float(l) * float(l);
            sum_xl += w * float(l) * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * float(Laux[i]) + this_min - x[i];
                cur_error += weights[i] * cost(diff);
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, size_t(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

// The entry of largest magnitude, sign kept (the first on ties): the symmetric fits put it on the most
// negative code, and Q3_K / Q6_K scale their sub-block scales against it the same way.
float largest_magnitude(const float* v, int n) {
    float best = 0, best_abs = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(v[i]) > best_abs) {
            best_abs = std::fabs(v[i]);
            best = v[i];
        }
    return best;
}


// Symmetric quantisation of n values to -nmax..nmax-1 (stored +nmax) weighted by x^2, trying 19 grids
// around the max-abs grid and keeping the best least-squares scale.
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
    const float max = largest_magnitude(x, n);
    if (std::fabs(max) < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -float(nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = int8_t(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
                L[i] = int8_t(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Symmetric quantisation of n values to -nmax..nmax-1 (stored +nmax), starting from the max-abs grid,
// then up to 5 passes of coordinate descent that move single codes while the x^2-weighted
// least-squares fit improves. Returns the scale (ggml's make_q3_quants with rmse).
float fit_symmetric_scale_descent(int n, int nmax, const float* x, int8_t* L) {
    const float max = largest_magnitude(x, n);
    if (std::fabs(max) < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -float(nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = int8_t(l);
        float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * float(L[i]);
            if (slx > 0) {
                float sl2 = suml2 - w * float(L[i]) * float(L[i]);
                int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * float(new_l);
                    sl2 += w * float(new_l) * float(new_l);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = int8_t(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
    return sumlx / suml2;
}

// The 2-bit codes of a Q2_K / Q3_K super-block into qs: element 128 h + 32 s + l at bits 2 s of
// byte 32 h + l.
void pack_two_bit_codes(const uint8_t* L, uint8_t* qs) {
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l)
            qs[32 * h + l] = uint8_t((L[128 * h + l] & 3) | (L[128 * h + l + 32] & 3) << 2 |
                                     (L[128 * h + l + 64] & 3) << 4 | (L[128 * h + l + 96] & 3) << 6);
}

}  // namespace

void quantize_row_q2_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ2_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        uint8_t L[kQK_K], Laux[16];
        float weights[16], mins[16], scales[16];
        float max_scale = 0, max_min = 0;
        for (int k = 0; k < 16; ++k) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * k + l]);
            scales[k] = fit_scale_min(16, 3, x + 16 * k, weights, L + 16 * k, &mins[k], Laux, -0.5f, 0.1f, 15, true);
            max_scale = std::max(max_scale, scales[k]);
            max_min = std::max(max_min, mins[k]);
        }
        // 4-bit sub-block scales and mins against the super-block's d and dmin.
        for (int k = 0; k < 16; ++k) b[i].scales[k] = 0;
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int k = 0; k < 16; ++k) b[i].scales[k] = uint8_t(nearest_int(iscale * scales[k]));
            b[i].d = f32_to_f16(max_scale / 15.f);
        } else {
            b[i].d = f32_to_f16(0.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int k = 0; k < 16; ++k) b[i].scales[k] = uint8_t(b[i].scales[k] | nearest_int(iscale * mins[k]) << 4);
            b[i].dmin = f32_to_f16(max_min / 15.f);
        } else {
            b[i].dmin = f32_to_f16(0.f);
        }
        // Re-quantise every value against the scales as actually stored.
        for (int k = 0; k < 16; ++k) {
            const float d = f16_to_f32(b[i].d) * float(b[i].scales[k] & 0x0f);
            if (!d) continue;
            const float dm = f16_to_f32(b[i].dmin) * float(b[i].scales[k] >> 4);
            for (int l = 0; l < 16; ++l)
                L[16 * k + l] = uint8_t(std::max(0, std::min(3, nearest_int((x[16 * k + l] + dm) / d))));
        }
        pack_two_bit_codes(L, b[i].qs);
    }
}

void quantize_row_q3_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ3_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        int8_t L[kQK_K];
        float scales[16];
        for (int k = 0; k < 16; ++k) scales[k] = fit_symmetric_scale_descent(16, 4, x + 16 * k, L + 16 * k);
        const float max_scale = largest_magnitude(scales, 16);
        // 6-bit signed sub-block scales (stored + 32) against d; max_scale maps to -32.
        uint8_t stored[16] = {};
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int k = 0; k < 16; ++k)
                stored[k] = uint8_t(std::max(-32, std::min(31, nearest_int(iscale * scales[k]))) + 32);
            b[i].d = f32_to_f16(1 / iscale);
        } else {
            // Every sub-block is zero: stored scale 0 reads as -32, times d = 0.
            b[i].d = f32_to_f16(0.f);
        }
        pack_q3_k_scales(stored, b[i].scales);
        for (int k = 0; k < 16; ++k) {
            const float d = f16_to_f32(b[i].d) * float(int(q3_k_scale(k, b[i].scales)) - 32);
            if (!d) continue;
            for (int l = 0; l < 16; ++l)
                L[16 * k + l] = int8_t(std::max(-4, std::min(3, nearest_int(x[16 * k + l] / d))) + 4);
        }
        // Codes 4..7 keep their third bit in hmask: element e at bit e / 32 of byte e % 32.
        uint8_t low[kQK_K];
        std::memset(b[i].hmask, 0, sizeof(b[i].hmask));
        for (int e = 0; e < kQK_K; ++e) {
            if (L[e] > 3) b[i].hmask[e % 32] |= uint8_t(1u << (e / 32));
            low[e] = uint8_t(L[e] & 3);
        }
        pack_two_bit_codes(low, b[i].qs);
    }
}

// The part Q4_K and Q5_K share: per 32-value sub-block a scale and a min fitted to codes
// 0..max_level (weighted by magnitude; the grid search from rmin in nstep steps), the eight
// scales and mins quantised to 6 bits against the super-block's d and dmin, and every code
// re-quantised against the scales as actually stored, into L.
template <typename Block>
void fit_k_super_block(const float* x, int max_level, float rmin, int nstep, Block& blk, uint8_t* L) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_scale_min(32, max_level, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
        lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    }
    pack_k_scales(ls, lm, blk.scales);
    blk.d = f32_to_f16(max_scale / 63.f);
    blk.dmin = f32_to_f16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k_scale_min(j, blk.scales, sc, m);
        const float d = f16_to_f32(blk.d) * float(sc);
        if (!d) continue;
        const float dm = f16_to_f32(blk.dmin) * float(m);
        for (int l = 0; l < 32; ++l)
            L[32 * j + l] = uint8_t(std::max(0, std::min(max_level, nearest_int((x[32 * j + l] + dm) / d))));
    }
}

void quantize_row_q4_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        uint8_t L[kQK_K];
        fit_k_super_block(x, 15, -1.f, 20, b[i], L);
        for (int p = 0; p < 4; ++p)
            for (int l = 0; l < 32; ++l)
                b[i].qs[32 * p + l] = uint8_t(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
}

// Q5_K: Q4_K's super-block with 5-bit codes; the sub-block fits search a narrower set of grids than
// Q4_K's (ggml: rmin -0.5, 16 steps), as 31 levels leave less to gain from moving the grid.
void quantize_row_q5_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ5_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        uint8_t L[kQK_K];
        fit_k_super_block(x, 31, -0.5f, 15, b[i], L);
        // Sub-blocks 2p and 2p+1 share qs[32 p ..]: low nibbles 2p, high nibbles 2p+1; their fifth bits
        // are bits 2p and 2p+1 of qh[l].
        std::memset(b[i].qh, 0, sizeof(b[i].qh));
        for (int p = 0; p < 4; ++p)
            for (int l = 0; l < 32; ++l) {
                const uint8_t lo = L[64 * p + l], hi = L[64 * p + 32 + l];
                b[i].qs[32 * p + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
                b[i].qh[l] |= uint8_t(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
            }
    }
}

void quantize_row_q6_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ6_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        int8_t L[kQK_K];
        float scales[16];
        for (int ib = 0; ib < 16; ++ib) scales[ib] = fit_symmetric_scale(16, 32, x + 16 * ib, L + 16 * ib);
        const float max_scale = largest_magnitude(scales, 16);
        if (std::fabs(max_scale) < kGroupMaxEps) {
            std::memset(&b[i], 0, sizeof(BlockQ6_K));
            continue;
        }
        float iscale = -128.f / max_scale;
        b[i].d = f32_to_f16(1 / iscale);
        for (int ib = 0; ib < 16; ++ib) b[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < 16; ++j) {
            float d = f16_to_f32(b[i].d) * float(b[i].scales[j]);
            if (!d) continue;
            for (int l = 0; l < 16; ++l)
                L[16 * j + l] = int8_t(std::max(-32, std::min(31, nearest_int(x[16 * j + l] / d))) + 32);
        }
        for (int h = 0; h < 2; ++h) {
            const int8_t* Lh = L + 128 * h;
            uint8_t* ql = b[i].ql + 64 * h;
            uint8_t* qh = b[i].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
                uint8_t q1 = uint8_t(Lh[l]), q2 = uint8_t(Lh[l + 32]), q3 = uint8_t(Lh[l + 64]), q4 = uint8_t(Lh[l + 96]);
                ql[l] = uint8_t((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                ql[l + 32] = uint8_t((q2 & 0x0f) | ((q4 & 0x0f) << 4));
                qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

}  // namespace pagoda::quant
