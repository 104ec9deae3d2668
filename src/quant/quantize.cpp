#include "quant/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"

namespace pagoda::quant {

using gguf::GgmlType;

namespace {

// Round to nearest, ties to even, for |v| < 2^22: the rounding ggml's K-quant search uses.
int nearest_int(float v) { return int(std::nearbyint(v)); }

constexpr float kGroupMaxEps = 1e-15f;

// Least-squares asymmetric quantisation of n values to 0..nmax with per-value importance weights:
// starts from the min/max grid, then tries nstep+1 slightly different grids and keeps the one with
// the lowest weighted squared error. Returns the scale; *neg_min receives -min (min <= 0).
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep) {
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
        best_error += weights[i] * (diff * diff);
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
                cur_error += weights[i] * (diff * diff);
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

// Symmetric quantisation of n values to -nmax..nmax-1 (stored +nmax) weighted by x^2, trying 19 grids
// around the max-abs grid and keeping the best least-squares scale.
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < kGroupMaxEps) {
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

void check_length(GgmlType type, int64_t n) {
    const int64_t block = gguf::type_traits(type).block_size;
    if (n < 0 || n % block != 0)
        fail("quantize: {} values is not a multiple of the {} block size {}", n, gguf::type_name(uint32_t(type)), block);
}

}  // namespace

void quantize_row_q8_0(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ8_0*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::round(x[j] * id));  // half away from zero
    }
}

void quantize_row_q4_0(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_0*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0, max = 0;  // max keeps its sign: the extreme value maps to -8 exactly
        for (int j = 0; j < kQK; ++j)
            if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
        float d = max / -8.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 16; ++j) {
            // Truncation of v + 8.5 rounds half up; 16 can only arise at the clipped end.
            auto q = [&](float v) { return uint8_t(std::min(15, int(int8_t(v * id + 8.5f)))); };
            b[i].qs[j] = uint8_t(q(x[j]) | (q(x[j + 16]) << 4));
        }
    }
}

void quantize_row_q4_1(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_1*>(out);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < kQK; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
        float d = (max - min) / 15.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        b[i].m = f32_to_f16(min);
        for (int j = 0; j < 16; ++j) {
            auto q = [&](float v) { return uint8_t(std::min(15, int(int8_t((v - min) * id + 0.5f)))); };
            b[i].qs[j] = uint8_t(q(x[j]) | (q(x[j + 16]) << 4));
        }
    }
}

void quantize_row_q4_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        uint8_t L[kQK_K], Laux[32];
        float weights[32], mins[8], scales[8];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            const float* xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
            float av_x = std::sqrt(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
            scales[j] = fit_scale_min(32, 15, xs, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        uint8_t ls[8], lm[8];
        for (int j = 0; j < 8; ++j) {
            ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
            lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
        }
        pack_k_scales(ls, lm, b[i].scales);
        b[i].d = f32_to_f16(max_scale / 63.f);
        b[i].dmin = f32_to_f16(max_min / 63.f);
        // Re-quantise every value against the scales as actually stored.
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k_scale_min(j, b[i].scales, sc, m);
            float d = f16_to_f32(b[i].d) * float(sc);
            if (!d) continue;
            float dm = f16_to_f32(b[i].dmin) * float(m);
            for (int l = 0; l < 32; ++l)
                L[32 * j + l] = uint8_t(std::max(0, std::min(15, nearest_int((x[32 * j + l] + dm) / d))));
        }
        for (int p = 0; p < 4; ++p)
            for (int l = 0; l < 32; ++l)
                b[i].qs[32 * p + l] = uint8_t(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
}

void quantize_row_q6_K(const float* x, void* out, int64_t n) {
    auto* b = static_cast<BlockQ6_K*>(out);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        int8_t L[kQK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            scales[ib] = fit_symmetric_scale(16, 32, x + 16 * ib, L + 16 * ib);
            if (std::fabs(scales[ib]) > max_abs_scale) {
                max_abs_scale = std::fabs(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
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

bool can_quantize(GgmlType type) {
    switch (type) {
        case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q4_K: case GgmlType::Q6_K:
            return true;
        default: return false;
    }
}

void quantize_row(GgmlType type, const float* x, void* out, int64_t n) {
    if (!can_quantize(type)) fail("quantize: no quantiser for type {}", gguf::type_name(uint32_t(type)));
    check_length(type, n);
    switch (type) {
        case GgmlType::Q8_0: return quantize_row_q8_0(x, out, n);
        case GgmlType::Q4_0: return quantize_row_q4_0(x, out, n);
        case GgmlType::Q4_1: return quantize_row_q4_1(x, out, n);
        case GgmlType::Q4_K: return quantize_row_q4_K(x, out, n);
        case GgmlType::Q6_K: return quantize_row_q6_K(x, out, n);
        default: return;
    }
}

}  // namespace pagoda::quant
