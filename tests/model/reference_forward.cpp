#include "reference_forward.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/half.h"

namespace pagoda::test {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

double element(const gguf::TensorInfo& t, int64_t i) {
    switch (t.type) {
        case gguf::GgmlType::F32: return reinterpret_cast<const float*>(t.data)[i];
        case gguf::GgmlType::F16: return f16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i]);
        case gguf::GgmlType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(t.data)[i]);
        default: throw std::runtime_error("reference forward: unsupported type in " + t.name);
    }
}

const gguf::TensorInfo& tensor(const gguf::File& f, const std::string& name) {
    const auto* t = f.find_tensor(name);
    if (!t) throw std::runtime_error("reference forward: missing " + name);
    return *t;
}

// GGUF shape [cols, rows]: element (r, c) at r * cols + c.
Matrix matrix(const gguf::File& f, const std::string& name) {
    const auto& t = tensor(f, name);
    int64_t cols = t.shape[0], rows = t.shape[1];
    Matrix m(static_cast<size_t>(rows), std::vector<double>(static_cast<size_t>(cols)));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) m[size_t(r)][size_t(c)] = element(t, r * cols + c);
    return m;
}

std::vector<double> vec(const gguf::File& f, const std::string& name) {
    const auto& t = tensor(f, name);
    std::vector<double> v(size_t(t.n_elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = element(t, int64_t(i));
    return v;
}

std::vector<double> mul(const Matrix& m, const std::vector<double>& x) {
    std::vector<double> y(m.size(), 0.0);
    for (size_t r = 0; r < m.size(); ++r)
        for (size_t c = 0; c < x.size(); ++c) y[r] += m[r][c] * x[c];
    return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
}

// Rotates pairs of each head's first `rot` dims by pos * base^(-2i/rot).
void rotate(std::vector<double>& v, int64_t heads, int64_t hd, int64_t rot, int pos, double base, bool neox) {
    for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < rot / 2; ++i) {
            double angle = pos * std::pow(base, -2.0 * double(i) / double(rot));
            size_t a = size_t(h * hd + (neox ? i : 2 * i));
            size_t b = size_t(h * hd + (neox ? i + rot / 2 : 2 * i + 1));
            double x0 = v[a], x1 = v[b];
            v[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
            v[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
    }
}

}  // namespace

std::vector<std::vector<double>> reference_forward(const gguf::File& f, const std::vector<int>& tokens) {
    const std::string arch = f.get_string("general.architecture");
    const std::string a = arch + ".";
    const int64_t layers = f.get_int(a + "block_count"), dim = f.get_int(a + "embedding_length");
    const int64_t heads = f.get_int(a + "attention.head_count");
    const int64_t kv_heads = f.get_int_or(a + "attention.head_count_kv", heads);
    const int64_t hd = f.get_int_or(a + "attention.key_length", dim / heads);
    const int64_t rot = f.get_int_or(a + "rope.dimension_count", hd);
    const double eps = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
    const double base = f.get_float_or(a + "rope.freq_base", 10000.0);
    const bool neox = arch == "qwen2";
    const bool bias = arch == "qwen2";

    const Matrix embd = matrix(f, "token_embd.weight");
    const Matrix head = f.find_tensor("output.weight") ? matrix(f, "output.weight") : embd;
    const std::vector<double> out_norm = vec(f, "output_norm.weight");

    const size_t n = tokens.size();
    std::vector<std::vector<double>> x(n);
    for (size_t t = 0; t < n; ++t) x[t] = embd[size_t(tokens[t])];

    for (int64_t l = 0; l < layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const Matrix wq = matrix(f, p + "attn_q.weight"), wk = matrix(f, p + "attn_k.weight");
        const Matrix wv = matrix(f, p + "attn_v.weight"), wo = matrix(f, p + "attn_output.weight");
        const Matrix wg = matrix(f, p + "ffn_gate.weight"), wu = matrix(f, p + "ffn_up.weight");
        const Matrix wd = matrix(f, p + "ffn_down.weight");
        const auto attn_norm = vec(f, p + "attn_norm.weight"), ffn_norm = vec(f, p + "ffn_norm.weight");

        std::vector<std::vector<double>> q(n), k(n), v(n);
        for (size_t t = 0; t < n; ++t) {
            auto h = rmsnorm(x[t], attn_norm, eps);
            q[t] = mul(wq, h); k[t] = mul(wk, h); v[t] = mul(wv, h);
            if (bias) {
                auto bq = vec(f, p + "attn_q.bias"), bk = vec(f, p + "attn_k.bias"), bv = vec(f, p + "attn_v.bias");
                for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
                for (size_t i = 0; i < k[t].size(); ++i) { k[t][i] += bk[i]; v[t][i] += bv[i]; }
            }
            rotate(q[t], heads, hd, rot, int(t), base, neox);
            rotate(k[t], kv_heads, hd, rot, int(t), base, neox);
        }
        for (size_t t = 0; t < n; ++t) {
            std::vector<double> attn(size_t(heads * hd), 0.0);
            for (int64_t h = 0; h < heads; ++h) {
                const int64_t kvh = h / (heads / kv_heads);
                std::vector<double> s(t + 1);
                double mx = -1e300;
                for (size_t u = 0; u <= t; ++u) {
                    double d = 0;
                    for (int64_t i = 0; i < hd; ++i) d += q[t][size_t(h * hd + i)] * k[u][size_t(kvh * hd + i)];
                    s[u] = d / std::sqrt(double(hd));
                    mx = std::max(mx, s[u]);
                }
                double z = 0;
                for (auto& e : s) z += e = std::exp(e - mx);
                for (size_t u = 0; u <= t; ++u)
                    for (int64_t i = 0; i < hd; ++i) attn[size_t(h * hd + i)] += s[u] / z * v[u][size_t(kvh * hd + i)];
            }
            auto o = mul(wo, attn);
            for (int64_t i = 0; i < dim; ++i) x[t][size_t(i)] += o[size_t(i)];
            auto h = rmsnorm(x[t], ffn_norm, eps);
            auto g = mul(wg, h), u = mul(wu, h);
            for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
            auto d = mul(wd, g);
            for (int64_t i = 0; i < dim; ++i) x[t][size_t(i)] += d[size_t(i)];
        }
    }
    std::vector<std::vector<double>> logits(n);
    for (size_t t = 0; t < n; ++t) logits[t] = mul(head, rmsnorm(x[t], out_norm, eps));
    return logits;
}

}  // namespace pagoda::test
