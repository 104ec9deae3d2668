#include "backend/cpu/ops/ops.h"

#include <cmath>

#include "core/cpu_features.h"
#include "backend/cpu/ops/ops_paths.h"

namespace pagoda::backend::cpu {

void rms_norm_reference(const float* x, const float* weight, int64_t n, float eps, float* out) {
    // Double accumulation: the sum of squares over a 4096-wide row loses bits in f32.
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    float scale = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void silu_mul_reference(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
    // 0.5 g (1 + tanh(u)) = g / (1 + e^(-2u)): one exp per value, on the ISA's exp_f32, in chunks.
    constexpr float kTwoSqrt2OverPi = 2.0f * 0.7978845608028654f;
    constexpr int64_t kChunk = 256;
    float e[kChunk];
    for (int64_t at = 0; at < n; at += kChunk) {
        const int64_t m = n - at < kChunk ? n - at : kChunk;
        const float* g = gate + at;
        for (int64_t i = 0; i < m; ++i) e[i] = -kTwoSqrt2OverPi * (g[i] + 0.044715f * g[i] * g[i] * g[i]);
        exp_f32(e, m, e);
        for (int64_t i = 0; i < m; ++i) out[at + i] = g[i] / (1.0f + e[i]) * up[at + i];
    }
}

void add_inplace_reference(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softmax_reference(float* x, int64_t n) {
    if (n <= 0) return;
    float m = x[0];
    for (int64_t i = 1; i < n; ++i) m = std::fmax(m, x[i]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - m);
        sum += x[i];
    }
    float inv = float(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void rope_reference(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos, const float* sin,
          bool neox) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
            int64_t a = neox ? i : 2 * i;
            int64_t b = neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos[i] - x1 * sin[i];
            v[b] = x0 * sin[i] + x1 * cos[i];
        }
    }
}

#define PAGODA_DISPATCH(fn, ...)                                     \
    switch (active_isa()) {                                          \
        case Isa::avx512: return detail::fn##_avx512(__VA_ARGS__);   \
        case Isa::avx2: return detail::fn##_avx2(__VA_ARGS__);       \
        case Isa::scalar: return fn##_reference(__VA_ARGS__);        \
    }

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
    PAGODA_DISPATCH(rms_norm, x, weight, n, eps, out)
}
void silu_mul(const float* gate, const float* up, int64_t n, float* out) { PAGODA_DISPATCH(silu_mul, gate, up, n, out) }
void add_inplace(float* y, const float* x, int64_t n) { PAGODA_DISPATCH(add_inplace, y, x, n) }
void softmax(float* x, int64_t n) { PAGODA_DISPATCH(softmax, x, n) }
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos, const float* sin, bool neox) {
    PAGODA_DISPATCH(rope, x, n_heads, head_dim, n_rot, cos, sin, neox)
}

void exp_f32_reference(const float* x, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}
void exp_f32(const float* x, int64_t n, float* out) { PAGODA_DISPATCH(exp_f32, x, n, out) }

#undef PAGODA_DISPATCH

}  // namespace pagoda::backend::cpu
