#include "quant/calibrated_quantize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"
#include "quant/codebook_quantize.h"
#include "quant/quantize.h"

namespace pagoda::quant {

using gguf::GgmlType;

int64_t QuantTarget::row_multiple() const {
    if (scheme) return weight_scheme == WeightScheme::int4_g128 ? 128 : 32;
    return gguf::type_traits(type).block_size;
}

std::string QuantTarget::name() const { return scheme ? scheme_name(weight_scheme) : gguf::type_name(uint32_t(type)); }

namespace {

inline float weight_at(const float* w, int64_t i) { return w ? w[i] : 1.0f; }

// Scales are stored as f16; every candidate is evaluated with the scale as it will be stored.
inline float stored(float v) { return f16_to_f32(f32_to_f16(v)); }

// Symmetric signed quantisation q in [lo, hi] with value d * q; returns the weighted squared error.
double symmetric_error(const float* x, const float* w, int64_t n, float d, int lo, int hi) {
    if (d == 0) {
        double e = 0;
        for (int64_t i = 0; i < n; ++i) e += weight_at(w, i) * double(x[i]) * x[i];
        return e;
    }
    const float id = 1.0f / d;
    double e = 0;
    for (int64_t i = 0; i < n; ++i) {
        float q = std::clamp(std::nearbyint(x[i] * id), float(lo), float(hi));
        double diff = double(x[i]) - double(d) * q;
        e += weight_at(w, i) * diff * diff;
    }
    return e;
}

// Best stored scale for value = d * q, q in [lo, hi], among clipped versions of the plain scales.
float search_symmetric_scale(const float* x, const float* w, int64_t n, int lo, int hi) {
    float amax = 0, signed_max = 0;
    for (int64_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) { amax = std::fabs(x[i]); signed_max = x[i]; }
    if (amax == 0) return 0;
    std::vector<float> bases = {amax / float(hi)};
    if (lo < -hi) bases.push_back(signed_max / float(lo));  // map the extreme onto the longer side (Q4_0's -8)
    float best_d = stored(bases[0]);
    double best = symmetric_error(x, w, n, best_d, lo, hi);
    for (float base : bases) {
        for (int step = 0; step <= 30; ++step) {
            float d = stored(base * (1.0f - 0.015f * float(step)));  // clip up to 45 % of the range
            double e = symmetric_error(x, w, n, d, lo, hi);
            if (e < best) { best = e; best_d = d; }
        }
    }
    return best_d;
}

void quantize_q8_0(const float* x, const float* w, void* out, int64_t n) {
    auto* b = static_cast<BlockQ8_0*>(out);
    for (int64_t blk = 0; blk < n / kQK; ++blk) {
        const float* xb = x + blk * kQK;
        const float* wb = w ? w + blk * kQK : nullptr;
        float d = search_symmetric_scale(xb, wb, kQK, -127, 127);
        b[blk].d = f32_to_f16(d);
        float id = d ? 1.0f / d : 0.0f;
        for (int j = 0; j < kQK; ++j) b[blk].qs[j] = int8_t(std::clamp(std::nearbyint(xb[j] * id), -127.0f, 127.0f));
    }
}

void quantize_q4_0(const float* x, const float* w, void* out, int64_t n) {
    auto* b = static_cast<BlockQ4_0*>(out);
    for (int64_t blk = 0; blk < n / kQK; ++blk) {
        const float* xb = x + blk * kQK;
        const float* wb = w ? w + blk * kQK : nullptr;
        float d = search_symmetric_scale(xb, wb, kQK, -8, 7);
        b[blk].d = f32_to_f16(d);
        float id = d ? 1.0f / d : 0.0f;
        auto q = [&](float v) { return uint8_t(std::clamp(std::nearbyint(v * id), -8.0f, 7.0f) + 8.0f); };
        for (int j = 0; j < 16; ++j) b[blk].qs[j] = uint8_t(q(xb[j]) | (q(xb[j + 16]) << 4));
    }
}

void quantize_int8_row(const float* x, const float* w, void* out, int64_t n) {
    const float d = search_symmetric_scale(x, w, n, -127, 127);
    const uint16_t dh = f32_to_f16(d);
    const float id = d ? 1.0f / d : 0.0f;
    auto* b = static_cast<BlockQ8_0*>(out);
    for (int64_t blk = 0; blk < n / kQK; ++blk) {
        b[blk].d = dh;
        for (int j = 0; j < kQK; ++j)
            b[blk].qs[j] = int8_t(std::clamp(std::nearbyint(x[blk * kQK + j] * id), -127.0f, 127.0f));
    }
}

// Asymmetric value = d * q + m, q in [0, 15].
double asymmetric_error(const float* x, const float* w, int64_t n, float d, float m) {
    const float id = d ? 1.0f / d : 0.0f;
    double e = 0;
    for (int64_t i = 0; i < n; ++i) {
        float q = std::clamp(std::nearbyint((x[i] - m) * id), 0.0f, 15.0f);
        double diff = double(x[i]) - (double(d) * q + m);
        e += weight_at(w, i) * diff * diff;
    }
    return e;
}

// Weighted least squares for (d, m) given the assignments q: minimise sum w (x - d q - m)^2.
bool refit(const float* x, const float* w, int64_t n, float d, float m, float& d_out, float& m_out) {
    const float id = d ? 1.0f / d : 0.0f;
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int64_t i = 0; i < n; ++i) {
        double wi = weight_at(w, i);
        double q = std::clamp(std::nearbyint((x[i] - m) * id), 0.0f, 15.0f);
        sw += wi; sq += wi * q; sqq += wi * q * q; sx += wi * x[i]; sqx += wi * q * x[i];
    }
    double det = sw * sqq - sq * sq;
    if (!(std::fabs(det) > 1e-30)) return false;
    d_out = float((sw * sqx - sq * sx) / det);
    m_out = float((sqq * sx - sq * sqx) / det);
    return d_out > 0 && std::isfinite(d_out) && std::isfinite(m_out);
}

void quantize_int4_group(const float* x, const float* w, BlockQ4_1* b, int64_t g) {
    float mn = x[0], mx = x[0];
    for (int64_t i = 1; i < g; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
    float best_d = stored((mx - mn) / 15.0f), best_m = stored(mn);
    double best = asymmetric_error(x, w, g, best_d, best_m);
    // Shrink the range towards its centre-of-zero and try a least-squares refit of each candidate.
    for (int step = 1; step <= 20; ++step) {
        float r = 1.0f - 0.02f * float(step);
        float lo = mn * r, hi = mx * r;
        float d = stored((hi - lo) / 15.0f), m = stored(lo);
        if (d <= 0) continue;
        double e = asymmetric_error(x, w, g, d, m);
        if (e < best) { best = e; best_d = d; best_m = m; }
    }
    float rd, rm;
    if (refit(x, w, g, best_d, best_m, rd, rm)) {
        rd = stored(rd);
        rm = stored(rm);
        double e = asymmetric_error(x, w, g, rd, rm);
        if (e < best) { best = e; best_d = rd; best_m = rm; }
    }
    const uint16_t dh = f32_to_f16(best_d), mh = f32_to_f16(best_m);
    const float id = best_d ? 1.0f / best_d : 0.0f;
    for (int64_t blk = 0; blk < g / kQK; ++blk) {
        b[blk].d = dh;
        b[blk].m = mh;
        const float* xb = x + blk * kQK;
        auto q = [&](float v) { return uint8_t(std::clamp(std::nearbyint((v - best_m) * id), 0.0f, 15.0f)); };
        for (int j = 0; j < 16; ++j) b[blk].qs[j] = uint8_t(q(xb[j]) | (q(xb[j + 16]) << 4));
    }
}

void check_finite(const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) fail("quantize: the weights hold a non-finite value ({}) at column {}", x[i], i);
}

}  // namespace

void quantize_row_calibrated(const QuantTarget& t, const float* x, const float* importance, void* out, int64_t n) {
    if (n <= 0 || n % t.row_multiple() != 0)
        fail("quantize: a row of {} values is not a multiple of {} ({})", n, t.row_multiple(), t.name());
    check_finite(x, n);
    if (t.scheme) {
        switch (t.weight_scheme) {
            case WeightScheme::int8_per_channel: return quantize_int8_row(x, importance, out, n);
            case WeightScheme::int4_g32:
            case WeightScheme::int4_g128: {
                const int64_t g = scheme_group_size(t.weight_scheme);
                auto* b = static_cast<BlockQ4_1*>(out);
                for (int64_t i = 0; i < n / g; ++i)
                    quantize_int4_group(x + i * g, importance ? importance + i * g : nullptr, b + i * (g / kQK), g);
                return;
            }
        }
    }
    switch (t.type) {
        case GgmlType::Q8_0: return quantize_q8_0(x, importance, out, n);
        case GgmlType::Q4_0: return quantize_q4_0(x, importance, out, n);
        case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4:
            return quantize_row_codebook(t.type, x, importance, out, n);
        default: return quantize_row(t.type, x, out, n);
    }
}

bool has_clipping_search(const QuantTarget& t) {
    return t.scheme || t.type == GgmlType::Q8_0 || t.type == GgmlType::Q4_0;
}

double weighted_relative_error(const float* a, const float* b, const float* importance, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        double w = weight_at(importance, i), d = double(a[i]) - b[i];
        num += w * d * d;
        den += w * double(a[i]) * a[i];
    }
    return den > 0 ? std::sqrt(num / den) : 0.0;
}

}  // namespace pagoda::quant
