// The row ops only encoders run (ops.h): LayerNorm with bias and the erf form of GELU.
#include <cmath>

#include "backend/cpu/ops/ops.h"

namespace pagoda::backend::cpu {

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
    // Two passes in double: a 1024-wide row's mean and spread lose bits in f32, and the cost is
    // nothing beside the matmuls around it.
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / double(n);
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
    const float inv = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
    const float m = float(mean);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * weight[i] + bias[i];
}

void gelu_inplace(float* x, int64_t n) {
    // erfc(a) = t (a1 + t (a2 + ... a5 t)) e^(-a^2), t = 1 / (1 + p a), a = |x| / sqrt 2; then
    // 1 + erf(x / sqrt 2) is erfc(a) for negative x and 2 - erfc(a) otherwise. The exp runs on the
    // ISA's exp_f32 over a chunk; the rest are plain loops the compiler vectorises.
    constexpr float kP = 0.3275911f, kA1 = 0.254829592f, kA2 = -0.284496736f, kA3 = 1.421413741f,
                    kA4 = -1.453152027f, kA5 = 1.061405429f, kInvSqrt2 = 0.7071067811865476f;
    constexpr int64_t kChunk = 256;
    float e[kChunk];
    for (int64_t at = 0; at < n; at += kChunk) {
        const int64_t m = n - at < kChunk ? n - at : kChunk;
        float* v = x + at;
        for (int64_t i = 0; i < m; ++i) {
            const float a = std::fabs(v[i]) * kInvSqrt2;
            e[i] = -a * a;
        }
        exp_f32(e, m, e);
        for (int64_t i = 0; i < m; ++i) {
            const float a = std::fabs(v[i]) * kInvSqrt2;
            const float t = 1.0f / (1.0f + kP * a);
            const float erfc = t * (kA1 + t * (kA2 + t * (kA3 + t * (kA4 + t * kA5)))) * e[i];
            v[i] = 0.5f * v[i] * (v[i] < 0 ? erfc : 2.0f - erfc);
        }
    }
}

}  // namespace pagoda::backend::cpu
