#include "backend/reference/reference_recurrent.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda::backend::reference {

void causal_conv1d(const CausalConv1d& op, std::span<const double> weight, const double* x, int64_t rows,
                   int64_t channels, double* state, double* out) {
    const int64_t kept = op.kernel - 1;  // earlier inputs the state holds
    for (int64_t t = 0; t < rows; ++t) {
        double* s = state + int64_t(op.state_rows[size_t(t)]) * kept * channels;
        const double* xt = x + t * channels;
        for (int64_t c = 0; c < channels; ++c) {
            const double* w = weight.data() + c * op.kernel;
            double sum = w[kept] * xt[c];
            for (int64_t j = 0; j < kept; ++j) sum += w[j] * s[j * channels + c];
            out[t * channels + c] = op.silu ? sum / (1 + std::exp(-sum)) : sum;
        }
        // The window slides by one input: drop the oldest, append this token's.
        std::copy(s + channels, s + kept * channels, s);
        std::copy(xt, xt + channels, s + (kept - 1) * channels);
    }
}

namespace {
// a / max(|a|, eps) * scale, ggml_l2_norm's form.
std::vector<double> l2_normalised(const double* a, int64_t n, double eps, double scale) {
    double sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) sum_sq += a[i] * a[i];
    const double factor = scale / std::max(std::sqrt(sum_sq), eps);
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = a[i] * factor;
    return out;
}
}  // namespace

void gated_delta_rule(const GatedDeltaRule& op, int64_t rows, const double* q, const double* k, const double* v,
                      const double* g, const double* beta, double* state, double* out) {
    const int64_t d = op.head_dim, hk = op.n_k_heads, hv = op.n_v_heads;
    std::vector<double> delta(static_cast<size_t>(d));
    for (int64_t t = 0; t < rows; ++t) {
        double* slot = state + int64_t(op.state_rows[size_t(t)]) * hv * d * d;
        for (int64_t h = 0; h < hv; ++h) {
            const int64_t kh = h % hk;
            const std::vector<double> qn = l2_normalised(q + (t * hk + kh) * d, d, op.l2_eps, op.scale);
            const std::vector<double> kn = l2_normalised(k + (t * hk + kh) * d, d, op.l2_eps, 1.0);
            const double* vh = v + (t * hv + h) * d;
            double* s = slot + h * d * d;  // s[i * d + j]: key i, value j
            const double decay = std::exp(g[t * hv + h]), b = beta[t * hv + h];
            for (int64_t i = 0; i < d * d; ++i) s[i] *= decay;
            for (int64_t j = 0; j < d; ++j) {
                double recalled = 0;  // (S^T kn)[j]
                for (int64_t i = 0; i < d; ++i) recalled += s[i * d + j] * kn[size_t(i)];
                delta[size_t(j)] = b * (vh[j] - recalled);
            }
            for (int64_t i = 0; i < d; ++i)
                for (int64_t j = 0; j < d; ++j) s[i * d + j] += kn[size_t(i)] * delta[size_t(j)];
            double* o = out + (t * hv + h) * d;
            for (int64_t j = 0; j < d; ++j) {
                double sum = 0;
                for (int64_t i = 0; i < d; ++i) sum += s[i * d + j] * qn[size_t(i)];
                o[j] = sum;
            }
        }
    }
}

}  // namespace pagoda::backend::reference
