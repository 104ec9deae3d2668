#include "backend/cpu/ops/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pagoda::backend::cpu {

void causal_conv1d_f32(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                       float* state, float* out) {
    const int64_t kept = op.kernel - 1;
    for (int64_t t = 0; t < rows; ++t) {
        float* s = state + int64_t(op.state_rows[size_t(t)]) * kept * channels;
        const float* xt = x + t * channels;
        float* o = out + t * channels;
        for (int64_t c = 0; c < channels; ++c) {
            const float* w = weight + c * op.kernel;
            float sum = w[kept] * xt[c];
            for (int64_t j = 0; j < kept; ++j) sum += w[j] * s[j * channels + c];
            o[c] = op.silu ? sum / (1.0f + std::exp(-sum)) : sum;
        }
        std::memmove(s, s + channels, size_t((kept - 1) * channels) * sizeof(float));
        std::memcpy(s + (kept - 1) * channels, xt, size_t(channels) * sizeof(float));
    }
}

namespace {
// out = a / max(|a|, eps) * scale: ggml_l2_norm's form (eps a floor on the norm, not a term under
// the root), its squares summed in double as ggml does.
void l2_normalise(const float* a, int64_t n, float eps, float scale, float* out) {
    double sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) sum_sq += double(a[i] * a[i]);
    const float factor = scale / std::max(std::sqrt(float(sum_sq)), eps);
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * factor;
}
}  // namespace

void gated_delta_rule_f32(const GatedDeltaRule& op, int64_t rows, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* state, float* out, int64_t head_begin,
                          int64_t head_end) {
    const int64_t d = op.head_dim, hk = op.n_k_heads, hv = op.n_v_heads;
    const auto width = static_cast<size_t>(d);
    std::vector<float> qn(width), kn(width), delta(width), acc(width);
    for (int64_t t = 0; t < rows; ++t) {
        float* slot = state + int64_t(op.state_rows[size_t(t)]) * hv * d * d;
        for (int64_t h = head_begin; h < head_end; ++h) {
            const int64_t kh = h % hk;
            l2_normalise(q + (t * hk + kh) * d, d, op.l2_eps, op.scale, qn.data());
            l2_normalise(k + (t * hk + kh) * d, d, op.l2_eps, 1.0f, kn.data());
            const float* vh = v + (t * hv + h) * d;
            float* s = slot + h * d * d;
            const float decay = std::exp(g[t * hv + h]), b = beta[t * hv + h];
            // Row by row (i over keys) so the inner loops run over contiguous values j.
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t i = 0; i < d; ++i) {
                float* si = s + i * d;
                for (int64_t j = 0; j < d; ++j) {
                    si[j] *= decay;
                    acc[size_t(j)] += si[j] * kn[size_t(i)];
                }
            }
            for (int64_t j = 0; j < d; ++j) delta[size_t(j)] = b * (vh[j] - acc[size_t(j)]);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t i = 0; i < d; ++i) {
                float* si = s + i * d;
                for (int64_t j = 0; j < d; ++j) {
                    si[j] += kn[size_t(i)] * delta[size_t(j)];
                    acc[size_t(j)] += si[j] * qn[size_t(i)];
                }
            }
            std::copy(acc.begin(), acc.end(), out + (t * hv + h) * d);
        }
    }
}

void sigmoid_mul_f32(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = up[i] / (1.0f + std::exp(-gate[i]));
}

}  // namespace pagoda::backend::cpu
