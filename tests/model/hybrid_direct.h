// The equations of the Qwen3.5 / Qwen3-Next hybrids that qwen35_model_test and qwen3next_model_test
// both evaluate directly (in doubles, from an F32 file): the causal conv + SiLU over q|k|v, one value
// head's gated delta-rule step, and the gated full-attention layer. Each test keeps what differs: how
// its projections are laid out (split or fused, value heads tiled or grouped) and its FFN.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "direct_equations.h"
#include "model/config.h"

namespace pagoda::model::direct {

inline double silu(double v) { return v / (1 + std::exp(-v)); }
inline double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// x · w / rms(x) over n values, in place.
inline void rms_norm_in_place(double* x, size_t n, const float* w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const double inv = 1 / std::sqrt(ss / double(n) + eps);
    for (size_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

// SiLU of the depthwise causal convolution at step t over `channels` channels; w is [K, channels]
// (channel c's taps at c * K), rows before the first are zero.
inline std::vector<double> conv_silu(const float* w, const Rows& in, int64_t t, int64_t K, int64_t channels) {
    std::vector<double> conv(static_cast<size_t>(channels));
    for (int64_t ch = 0; ch < channels; ++ch) {
        double s = 0;
        for (int64_t j = 0; j < K; ++j) {
            const int64_t src = t - (K - 1) + j;
            if (src >= 0) s += double(w[ch * K + j]) * in[size_t(src)][size_t(ch)];
        }
        conv[size_t(ch)] = silu(s);
    }
    return conv;
}

// One value head's gated delta rule at one step. q and k (dh each) are L2-normalised (q also scaled
// by 1/sqrt(dh)); the state S (dh x dh, S[i * dh + j]: key i, value j) decays by
// exp(softplus(alpha_biased) · a), takes k (sigmoid(beta) (v - Sᵀk))ᵀ, and the head's output is
// rms_norm(Sᵀq) · silu(z), written to out.
inline void delta_rule_head(double* S, std::vector<double> q, std::vector<double> k, const double* v, const double* z,
                            double alpha_biased, double a, double beta, const float* norm_w, double eps, int64_t dh,
                            double* out) {
    double qn = 0, kn = 0;
    for (int64_t i = 0; i < dh; ++i) qn += q[size_t(i)] * q[size_t(i)], kn += k[size_t(i)] * k[size_t(i)];
    qn = 1 / std::max(std::sqrt(qn), eps) / std::sqrt(double(dh));
    kn = 1 / std::max(std::sqrt(kn), eps);
    for (int64_t i = 0; i < dh; ++i) q[size_t(i)] *= qn, k[size_t(i)] *= kn;
    const double g = std::log1p(std::exp(alpha_biased)) * a;
    const double b = sigmoid(beta);
    for (int64_t i = 0; i < dh * dh; ++i) S[i] *= std::exp(g);
    for (int64_t j = 0; j < dh; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < dh; ++i) sk += S[i * dh + j] * k[size_t(i)];
        const double d = b * (v[j] - sk);
        for (int64_t i = 0; i < dh; ++i) S[i * dh + j] += k[size_t(i)] * d;
    }
    for (int64_t j = 0; j < dh; ++j) {
        double o = 0;
        for (int64_t i = 0; i < dh; ++i) o += S[i * dh + j] * q[size_t(i)];
        out[j] = o;
    }
    rms_norm_in_place(out, size_t(dh), norm_w, eps);
    for (int64_t j = 0; j < dh; ++j) out[j] *= silu(z[j]);
}

// The gated full-attention layer of block prefix `p` over the normed rows h: attn_q holds per head
// its query then its gate, per-head RMS norms on q and k, NEOX RoPE over the first rope_dims,
// causal attention, the output times sigmoid(gate), then attn_output.
inline Rows gated_attention(const Weights& w, const std::string& p, const Rows& h, const ModelConfig& c, double eps) {
    const int64_t T = int64_t(h.size()), H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim;
    Rows q(static_cast<size_t>(T)), gate(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        const auto qg = Weights::mul(w.tensor(p + "attn_q.weight"), h[size_t(t)], 2 * H * hd);
        for (int64_t hh = 0; hh < H; ++hh) {
            q[size_t(t)].insert(q[size_t(t)].end(), qg.begin() + hh * 2 * hd, qg.begin() + hh * 2 * hd + hd);
            gate[size_t(t)].insert(gate[size_t(t)].end(), qg.begin() + hh * 2 * hd + hd, qg.begin() + (hh + 1) * 2 * hd);
        }
        k[size_t(t)] = Weights::mul(w.tensor(p + "attn_k.weight"), h[size_t(t)], KV * hd);
        v[size_t(t)] = Weights::mul(w.tensor(p + "attn_v.weight"), h[size_t(t)], KV * hd);
        for (auto [vec, heads, name] : {std::tuple{&q[size_t(t)], H, "attn_q_norm"}, std::tuple{&k[size_t(t)], KV, "attn_k_norm"}})
            for (int64_t hh = 0; hh < heads; ++hh) {
                rms_norm_in_place(vec->data() + hh * hd, size_t(hd), w.tensor(p + name + ".weight"), eps);
                for (int64_t i = 0; i < c.rope_dims / 2; ++i) {  // NEOX pairs (i, i + rope/2)
                    const double a = double(t) * std::pow(double(c.rope_theta), -2.0 * double(i) / double(c.rope_dims));
                    double& x0 = (*vec)[size_t(hh * hd + i)];
                    double& x1 = (*vec)[size_t(hh * hd + i + c.rope_dims / 2)];
                    const double a0 = x0, a1 = x1;
                    x0 = a0 * std::cos(a) - a1 * std::sin(a);
                    x1 = a0 * std::sin(a) + a1 * std::cos(a);
                }
            }
    }
    Rows mixed(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> out = attend(q, k, v, t, H, KV, hd, hd, std::sqrt(double(hd)));
        for (int64_t i = 0; i < H * hd; ++i) out[size_t(i)] *= sigmoid(gate[size_t(t)][size_t(i)]);
        mixed[size_t(t)] = Weights::mul(w.tensor(p + "attn_output.weight"), out, c.dim);
    }
    return mixed;
}

}  // namespace pagoda::model::direct
