#include "quant/weight_schemes.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "quant/block_formats.h"

namespace pagoda::quant {

using gguf::GgmlType;

const char* scheme_name(WeightScheme s) {
    switch (s) {
        case WeightScheme::int8_per_channel: return "int8";
        case WeightScheme::int4_g32: return "int4-g32";
        case WeightScheme::int4_g128: return "int4-g128";
    }
    return "?";
}

std::optional<WeightScheme> scheme_from_name(const std::string& name) {
    if (name == "int8") return WeightScheme::int8_per_channel;
    if (name == "int4-g32") return WeightScheme::int4_g32;
    if (name == "int4-g128") return WeightScheme::int4_g128;
    return std::nullopt;
}

GgmlType scheme_storage_type(WeightScheme s) {
    return s == WeightScheme::int8_per_channel ? GgmlType::Q8_0 : GgmlType::Q4_1;
}

int64_t scheme_group_size(WeightScheme s) {
    switch (s) {
        case WeightScheme::int8_per_channel: return 0;
        case WeightScheme::int4_g32: return 32;
        case WeightScheme::int4_g128: return 128;
    }
    return 0;
}

namespace {

// f16 scale for a positive real scale; fails (instead of storing inf) when it does not fit.
uint16_t scale_to_f16(float s, const char* what) {
    if (!std::isfinite(s) || s > 65504.f) fail("quantize: {} scale {} does not fit in f16", what, s);
    return f32_to_f16(s);
}

void quantize_int8_row(const float* x, BlockQ8_0* b, int64_t n) {
    float amax = 0;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    uint16_t dh = scale_to_f16(amax / 127.f, "int8 row");
    float d = f16_to_f32(dh);  // quantise against the scale as stored
    float id = d > 0 ? 1.f / d : 0.f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        b[i].d = dh;
        for (int j = 0; j < kQK; ++j) {
            float q = std::round(x[i * kQK + j] * id);
            b[i].qs[j] = int8_t(std::clamp(q, -127.f, 127.f));
        }
    }
}

void quantize_int4_group(const float* x, BlockQ4_1* b, int64_t g) {
    float mn = x[0], mx = x[0];
    for (int64_t i = 1; i < g; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
    uint16_t dh = scale_to_f16((mx - mn) / 15.f, "int4 group");
    if (!std::isfinite(mn) || std::fabs(mn) > 65504.f) fail("quantize: int4 group minimum {} does not fit in f16", mn);
    uint16_t mh = f32_to_f16(mn);
    float d = f16_to_f32(dh), m = f16_to_f32(mh);
    float id = d > 0 ? 1.f / d : 0.f;
    for (int64_t blk = 0; blk < g / kQK; ++blk) {
        b[blk].d = dh;
        b[blk].m = mh;
        auto q = [&](float v) { return uint8_t(std::clamp(std::round((v - m) * id), 0.f, 15.f)); };
        const float* xb = x + blk * kQK;
        for (int j = 0; j < 16; ++j) b[blk].qs[j] = uint8_t(q(xb[j]) | (q(xb[j + 16]) << 4));
    }
}

}  // namespace

void quantize_row_scheme(WeightScheme s, const float* x, void* out, int64_t n) {
    int64_t g = scheme_group_size(s);
    int64_t unit = g ? g : kQK;
    if (n <= 0 || n % unit != 0)
        fail("quantize: a row of {} values is not a multiple of {} ({})", n, unit, scheme_name(s));
    if (s == WeightScheme::int8_per_channel) return quantize_int8_row(x, static_cast<BlockQ8_0*>(out), n);
    auto* b = static_cast<BlockQ4_1*>(out);
    for (int64_t i = 0; i < n / g; ++i) quantize_int4_group(x + i * g, b + i * (g / kQK), g);
}

}  // namespace pagoda::quant
