// Gemma 4's vision tower (vision/gemma4v_tower.h) against a plain host implementation written here
// from transformers' Gemma4VisionModel and llama.cpp's gemma4v graph (double precision, no backend):
// the [-1, 1] pixel map, the two position tables, the RMSNorm sandwich, q/k/v head norms, the 2D
// RoPE in its own form (each half of a head NEOX-paired within itself: the tower's quarter swap is
// not used here), attention with scale 1, the GeGLU MLP, the pooler's sqrt(d), the standardisation,
// the unweighted norm and the projection, and Gemma4ClippableLinear bounds. This checks what
// CPU-vs-reference cannot: both backends run the same composition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "gemma4v_fixture.h"
#include "gguf/gguf.h"
#include "vision/gemma4v_tower.h"

namespace pagoda::test {
namespace {

using Matrix = std::vector<double>;

std::vector<double> tensor(const gguf::File& f, const std::string& name) {
    const auto* t = f.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> v(size_t(t->n_elements()));
    std::memcpy(v.data(), t->data, v.size() * 4);
    return {v.begin(), v.end()};
}

double scalar_or(const gguf::File& f, const std::string& name, double fallback) {
    return f.find_tensor(name) ? tensor(f, name)[0] : fallback;
}

// y[r][o] = sum_i clamp(x[r][i]) w[o][i], clamped again, with NAME's bounds when the file has them.
Matrix linear(const gguf::File& f, const std::string& name, const Matrix& x, int64_t in, int64_t out) {
    const std::string stem = name.substr(0, name.size() - 7);
    const double in_lo = scalar_or(f, stem + ".input_min", -INFINITY), in_hi = scalar_or(f, stem + ".input_max", INFINITY);
    const double out_lo = scalar_or(f, stem + ".output_min", -INFINITY), out_hi = scalar_or(f, stem + ".output_max", INFINITY);
    const std::vector<double> w = tensor(f, name);
    const int64_t rows = int64_t(x.size()) / in;
    Matrix y(size_t(rows * out));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
            double s = 0;
            for (int64_t i = 0; i < in; ++i) s += std::clamp(x[size_t(r * in + i)], in_lo, in_hi) * w[size_t(o * in + i)];
            y[size_t(r * out + o)] = std::clamp(s, out_lo, out_hi);
        }
    return y;
}

// RMSNorm over each run of `width` values, times w (all ones when empty).
Matrix rms(const Matrix& x, int64_t width, const std::vector<double>& w) {
    Matrix y(x.size());
    for (size_t r = 0; r < x.size() / size_t(width); ++r) {
        double ss = 0;
        for (int64_t i = 0; i < width; ++i) ss += x[r * size_t(width) + size_t(i)] * x[r * size_t(width) + size_t(i)];
        const double inv = 1.0 / std::sqrt(ss / double(width) + 1e-6);
        for (int64_t i = 0; i < width; ++i)
            y[r * size_t(width) + size_t(i)] = x[r * size_t(width) + size_t(i)] * inv * (w.empty() ? 1.0 : w[size_t(i)]);
    }
    return y;
}

double gelu_tanh(double e) { return 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e))); }

// llama.cpp's gemma4v RoPE: each half of a head is a NEOX rotation of hd/2 dims (pair i with i + hd/4,
// angle pos 100^(-4i/hd)); the first half turns by the column, the second by the row.
void rope(Matrix& x, int64_t heads, int64_t hd, const std::vector<int64_t>& col, const std::vector<int64_t>& row) {
    const int64_t n = int64_t(x.size()) / (heads * hd), q = hd / 4;
    for (int64_t r = 0; r < n; ++r)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t half = 0; half < 2; ++half)
                for (int64_t i = 0; i < q; ++i) {
                    const double pos = double(half == 0 ? col[size_t(r)] : row[size_t(r)]);
                    const double angle = pos * std::pow(100.0, -double(4 * i) / double(hd));
                    double* v = &x[size_t((r * heads + h) * hd + half * (hd / 2))];
                    const double a = v[i], b = v[i + q];
                    v[i] = a * std::cos(angle) - b * std::sin(angle);
                    v[i + q] = a * std::sin(angle) + b * std::cos(angle);
                }
}

std::vector<float> host_tower(const gguf::File& f, const vision::RandomMmprojSpec& s, const vision::Patches& patches) {
    const int64_t n = patches.count(), d = s.n_embd, heads = s.n_heads, hd = d / heads, gw = patches.grid_w;
    const int64_t row_size = patches.row_size(), k = s.pool;
    std::vector<int64_t> col(static_cast<size_t>(n)), row(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) col[size_t(r)] = r % gw, row[size_t(r)] = r / gw;
    Matrix px(patches.rows.size());
    for (size_t i = 0; i < px.size(); ++i) px[i] = 2.0 * patches.rows[i] - 1.0;
    Matrix x = linear(f, "v.patch_embd.weight", px, row_size, d);
    const std::vector<double> pos = tensor(f, "v.position_embd.weight");
    for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < d; ++i)
            x[size_t(r * d + i)] += pos[size_t(col[size_t(r)] * d + i)] + pos[size_t((s.pos_size + row[size_t(r)]) * d + i)];
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string b = "v.blk." + std::to_string(l) + ".";
        const Matrix h = rms(x, d, tensor(f, b + "ln1.weight"));
        Matrix q = rms(linear(f, b + "attn_q.weight", h, d, d), hd, tensor(f, b + "attn_q_norm.weight"));
        Matrix kk = rms(linear(f, b + "attn_k.weight", h, d, d), hd, tensor(f, b + "attn_k_norm.weight"));
        const Matrix v = rms(linear(f, b + "attn_v.weight", h, d, d), hd, {});
        rope(q, heads, hd, col, row);
        rope(kk, heads, hd, col, row);
        Matrix attn(size_t(n * d), 0.0);
        std::vector<double> p(static_cast<size_t>(n));
        for (int64_t hh = 0; hh < heads; ++hh)
            for (int64_t i = 0; i < n; ++i) {
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < n; ++j) {
                    double dot = 0;
                    for (int64_t e = 0; e < hd; ++e) dot += q[size_t(i * d + hh * hd + e)] * kk[size_t(j * d + hh * hd + e)];
                    p[size_t(j)] = dot;  // scale 1
                    m = std::max(m, dot);
                }
                for (int64_t j = 0; j < n; ++j) sum += p[size_t(j)] = std::exp(p[size_t(j)] - m);
                for (int64_t j = 0; j < n; ++j)
                    for (int64_t e = 0; e < hd; ++e)
                        attn[size_t(i * d + hh * hd + e)] += p[size_t(j)] / sum * v[size_t(j * d + hh * hd + e)];
            }
        const Matrix o = rms(linear(f, b + "attn_out.weight", attn, d, d), d, tensor(f, b + "attn_post_norm.weight"));
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
        const Matrix h2 = rms(x, d, tensor(f, b + "ln2.weight"));
        const Matrix g = linear(f, b + "ffn_gate.weight", h2, d, s.n_ff), u = linear(f, b + "ffn_up.weight", h2, d, s.n_ff);
        Matrix gu(g.size());
        for (size_t i = 0; i < g.size(); ++i) gu[i] = gelu_tanh(g[i]) * u[i];
        const Matrix ff = rms(linear(f, b + "ffn_down.weight", gu, s.n_ff, d), d, tensor(f, b + "ffn_post_norm.weight"));
        for (size_t i = 0; i < x.size(); ++i) x[i] += ff[i];
    }
    const int64_t ow = gw / k, oh = patches.grid_h / k;
    const std::vector<double> bias = tensor(f, "v.std_bias"), scale = tensor(f, "v.std_scale");
    Matrix pooled(size_t(ow * oh * d), 0.0);
    for (int64_t r = 0; r < n; ++r) {
        const int64_t t = (row[size_t(r)] / k) * ow + col[size_t(r)] / k;
        for (int64_t i = 0; i < d; ++i) pooled[size_t(t * d + i)] += x[size_t(r * d + i)] / double(k * k);
    }
    for (size_t i = 0; i < pooled.size(); ++i)
        pooled[i] = (pooled[i] * std::sqrt(double(d)) - bias[i % size_t(d)]) * scale[i % size_t(d)];
    const Matrix out = linear(f, "mm.input_projection.weight", rms(pooled, d, {}), d, s.text_dim);
    return {out.begin(), out.end()};
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
        scale = std::max(scale, std::fabs(double(want[i])));
    }
    return err / scale;
}

TEST(Gemma4vTowerHost, CpuEqualsTheHostFormulas) {
    const vision::RandomMmprojSpec s = gemma4v_spec();
    const auto p = gemma4v_projector(s);
    auto b = backend::make_backend("cpu");
    vision::Gemma4vTower tower(*p->file, *b);
    for (auto [w, h] : {std::pair<int64_t, int64_t>{30, 21}, {13, 40}}) {
        const vision::TowerInput in = tower.preprocess(gemma4v_noise_image(w, h, uint32_t(w)));
        const std::vector<float> got = tower.encode(in.patches), want = host_tower(*p->file, s, in.patches);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_LT(worst_relative(got, want), 1e-4) << w << "x" << h;
    }
}

TEST(Gemma4vTowerHost, ClippableLinearBoundsClampInputsAndOutputs) {
    // Tight bounds on three matrices (inputs of one, outputs of another, both on the projection) change
    // the embeddings, and the tower applies them as the host formulas do.
    const vision::RandomMmprojSpec s = gemma4v_spec();
    const float bounds[6] = {-0.3f, 0.3f, -0.2f, 0.2f, -0.5f, 0.4f};
    const auto p = gemma4v_projector(s, {}, {}, [&](gguf::Writer& w) {
        w.add_tensor("v.blk.0.ffn_down.input_min", gguf::GgmlType::F32, {1}, &bounds[0], 4);
        w.add_tensor("v.blk.0.ffn_down.input_max", gguf::GgmlType::F32, {1}, &bounds[1], 4);
        w.add_tensor("v.blk.1.attn_q.output_min", gguf::GgmlType::F32, {1}, &bounds[2], 4);
        w.add_tensor("v.blk.1.attn_q.output_max", gguf::GgmlType::F32, {1}, &bounds[3], 4);
        w.add_tensor("mm.input_projection.output_min", gguf::GgmlType::F32, {1}, &bounds[4], 4);
        w.add_tensor("mm.input_projection.output_max", gguf::GgmlType::F32, {1}, &bounds[5], 4);
    });
    const auto plain = gemma4v_projector(s);
    auto b = backend::make_backend("cpu"), b2 = backend::make_backend("cpu");
    vision::Gemma4vTower tower(*p->file, *b), unclamped(*plain->file, *b2);
    const vision::TowerInput in = tower.preprocess(gemma4v_noise_image(30, 21, 9));
    const std::vector<float> got = tower.encode(in.patches), want = host_tower(*p->file, s, in.patches);
    EXPECT_LT(worst_relative(got, want), 1e-4);
    EXPECT_NE(got, unclamped.encode(in.patches));
    EXPECT_LE(*std::max_element(got.begin(), got.end()), 0.4f);
    EXPECT_GE(*std::min_element(got.begin(), got.end()), -0.5f);
}

}  // namespace
}  // namespace pagoda::test
