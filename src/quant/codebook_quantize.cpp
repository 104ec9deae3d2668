#include "quant/codebook_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/codebook_blocks.h"

namespace pagoda::quant {

using gguf::GgmlType;

namespace {

// Index of the kValuesIq4nl entry nearest v (ascending table: a binary search; the lower of equals).
int nearest_iq4(float v) {
    const int8_t* kv = kValuesIq4nl;
    if (v <= float(kv[0])) return 0;
    if (v >= float(kv[15])) return 15;
    int lo = 0, hi = 15;  // kv[lo] < v <= kv[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v > float(kv[mid])) lo = mid;
        else hi = mid;
    }
    return v - float(kv[lo]) <= float(kv[hi]) - v ? lo : hi;
}

// Index of the kValuesMxfp4 entry nearest v: the magnitude among 0, 1, 2, 3, 4, 6, 8, 12 (the lower
// of equals), the sign from v (zero is code 0).
int nearest_mxfp4(float v) {
    const float a = std::fabs(v);
    int k = 0;
    for (int i = 1; i < 8; ++i)
        if (a - float(kValuesMxfp4[k]) > float(kValuesMxfp4[i]) - a) k = i;
    return v < 0 && k > 0 ? k + 8 : k;
}

int nearest(const int8_t* table, float v) { return table == kValuesIq4nl ? nearest_iq4(v) : nearest_mxfp4(v); }

float stored_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// The error weights of a row (see the header).
std::vector<float> error_weights(const float* x, const float* importance, int64_t n) {
    std::vector<float> w(static_cast<size_t>(n));
    double sum2 = 0;
    for (int64_t i = 0; i < n; ++i) sum2 += double(x[i]) * x[i];
    const float sigma2 = n > 0 ? float(2 * sum2 / double(n)) : 0.f;
    for (int64_t i = 0; i < n; ++i)
        w[size_t(i)] = importance ? importance[i] * std::sqrt(sigma2 + x[i] * x[i]) : x[i] * x[i];
    return w;
}

// The best unstored scale of 32 values for value = d * kValuesIq4nl[code] (0 when all are 0).
float search_iq4_scale(const float* x, const float* w) {
    float amax = 0, max = 0;
    for (int i = 0; i < 32; ++i)
        if (std::fabs(x[i]) > amax) { amax = std::fabs(x[i]); max = x[i]; }
    if (amax == 0) return 0.f;
    const int8_t* kv = kValuesIq4nl;
    // Candidate inverse scales: max onto every table entry (so an exactly representable block finds
    // its own scale), and onto either end shifted by up to 7.
    float ids[16 + 28];
    int n_ids = 0;
    for (int k = 0; k < 16; ++k) ids[n_ids++] = float(kv[k]) / max;
    for (int anchor : {int(kv[0]), int(kv[15])})
        for (int shift = -7; shift <= 7; ++shift)
            if (shift != 0) ids[n_ids++] = (float(anchor) + float(shift)) / max;
    float best_d = max / float(kv[0]);
    double best_score = -1;
    for (int c = 0; c < n_ids; ++c) {
        const float id = ids[c];
        double sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
            const double q = kv[nearest_iq4(id * x[i])];
            sumqx += double(w[i]) * q * x[i];
            sumq2 += double(w[i]) * q * q;
        }
        // Least-squares d = sumqx / sumq2 leaves error sum(w x^2) - sumqx^2 / sumq2.
        if (sumq2 > 0 && sumqx * sumqx / sumq2 > best_score) {
            best_score = sumqx * sumqx / sumq2;
            best_d = float(sumqx / sumq2);
        }
    }
    return best_d;
}

// Nibble codes of 32 values against scale d (packed as Q4_0: value j low, j + 16 high).
void pack_codes(const float* x, float d, const int8_t* table, uint8_t* qs) {
    uint8_t code[32];  // x / d, not x * (1 / d): MXFP4's smallest scales have no finite inverse
    for (int i = 0; i < 32; ++i) code[i] = uint8_t(nearest(table, d != 0 ? x[i] / d : 0.f));
    for (int j = 0; j < 16; ++j) qs[j] = uint8_t(code[j] | (code[j + 16] << 4));
}

void quantize_iq4_nl(const float* x, const float* w, uint8_t* out, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, out += 18) {
        const float d = stored_f16(search_iq4_scale(x + 32 * b, w + 32 * b));
        const uint16_t h = f32_to_f16(d);
        std::memcpy(out, &h, 2);
        pack_codes(x + 32 * b, d, kValuesIq4nl, out + 2);
    }
}

void quantize_iq4_xs(const float* x, const float* w, uint8_t* out, int64_t n) {
    for (int64_t sb = 0; sb < n / 256; ++sb, out += 136) {
        const float* xs = x + 256 * sb;
        const float* ws = w + 256 * sb;
        float scale[8], max_scale = 0;
        for (int j = 0; j < 8; ++j) {
            scale[j] = search_iq4_scale(xs + 32 * j, ws + 32 * j);
            if (std::fabs(scale[j]) > std::fabs(max_scale)) max_scale = scale[j];
        }
        const float d = stored_f16(-max_scale / 32.f);
        const uint16_t h = f32_to_f16(d);
        std::memcpy(out, &h, 2);
        uint16_t scales_h = 0;
        std::memset(out + 4, 0, 4);
        for (int j = 0; j < 8; ++j) {
            const int l = d != 0 ? std::clamp(int(std::nearbyint(scale[j] / d)), -32, 31) : 0;
            const int ls = l + 32;
            out[4 + j / 2] |= uint8_t((ls & 0x0f) << (4 * (j % 2)));
            scales_h |= uint16_t((ls >> 4) << (2 * j));
            pack_codes(xs + 32 * j, d * float(l), kValuesIq4nl, out + 8 + 16 * j);
        }
        std::memcpy(out + 2, &scales_h, 2);
    }
}

double mxfp4_error(const float* x, const float* w, int e) {
    const float d = e8m0_half_to_f32(uint8_t(e));
    double err = 0;
    for (int i = 0; i < 32; ++i) {
        const double diff = double(x[i]) - double(kValuesMxfp4[nearest(kValuesMxfp4, x[i] / d)]) * d;
        err += double(w[i]) * diff * diff;
    }
    return err;
}

void quantize_mxfp4(const float* x, const float* w, uint8_t* out, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, out += 17) {
        const float* xb = x + 32 * b;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        // Smallest e with 12 * 2^(e - 128) >= amax (12: the doubled E2M1 maximum, 6).
        int e0 = 0;
        while (e0 < 254 && double(12) * std::ldexp(1.0, e0 - 128) < double(amax)) ++e0;
        int best_e = e0;
        double best = mxfp4_error(xb, w + 32 * b, e0);
        for (int e : {e0 - 1, e0 + 1}) {
            if (e < 0 || e > 254) continue;
            const double err = mxfp4_error(xb, w + 32 * b, e);
            if (err < best) { best = err; best_e = e; }
        }
        out[0] = uint8_t(best_e);
        pack_codes(xb, e8m0_half_to_f32(uint8_t(best_e)), kValuesMxfp4, out + 1);
    }
}

}  // namespace

bool is_codebook_quantisable(GgmlType type) {
    return type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS || type == GgmlType::MXFP4;
}

void quantize_row_codebook(GgmlType type, const float* x, const float* importance, void* out, int64_t n) {
    if (!is_codebook_quantisable(type))
        fail("quantize: no quantiser for {} (files holding it load and compute; quantising to it is not "
             "supported: use iq4_nl, iq4_xs or mxfp4)", gguf::type_name(uint32_t(type)));
    const int64_t block = gguf::type_traits(type).block_size;
    if (n < 0 || n % block != 0)
        fail("quantize: {} values is not a multiple of the {} block size {}", n, gguf::type_name(uint32_t(type)), block);
    const std::vector<float> w = error_weights(x, importance, n);
    auto* o = static_cast<uint8_t*>(out);
    if (type == GgmlType::IQ4_NL) quantize_iq4_nl(x, w.data(), o, n);
    else if (type == GgmlType::IQ4_XS) quantize_iq4_xs(x, w.data(), o, n);
    else quantize_mxfp4(x, w.data(), o, n);
}

}  // namespace pagoda::quant
