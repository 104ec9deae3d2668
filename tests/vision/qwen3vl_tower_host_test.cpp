// Qwen3-VL's vision tower (vision/qwen3vl_tower.h) against a plain host implementation written here
// from transformers' Qwen3VLVisionModel (double precision, no backend): the summed temporal patch
// kernels, the interpolated positions, the 2D RoPE's row/column halves, the merge order, the main
// merger's per-patch norm and the deep-stack mergers' norm after the shuffle, GELU forms. This checks
// what CPU-vs-reference cannot: both backends run the same composition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "vision/qwen3vl_preprocess.h"
#include "vision/qwen3vl_tower.h"
#include "vision/random_mmproj.h"

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

// y[r][o] = b[o] + sum_i x[r][i] w[o][i]  (w: GGUF [in, out], out rows of in)
Matrix linear(const Matrix& x, int64_t rows, int64_t in, const std::vector<double>& w, int64_t out,
              const std::vector<double>& b, int64_t w_row0 = 0) {
    Matrix y(size_t(rows * out));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
            double s = b[size_t(w_row0 + o)];
            for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t((w_row0 + o) * in + i)];
            y[size_t(r * out + o)] = s;
        }
    return y;
}

Matrix layer_norm(const Matrix& x, int64_t width, const std::vector<double>& w, const std::vector<double>& b) {
    Matrix y(x.size());
    for (size_t r = 0; r < x.size() / size_t(width); ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < width; ++i) mean += x[r * size_t(width) + size_t(i)];
        mean /= double(width);
        for (int64_t i = 0; i < width; ++i) var += std::pow(x[r * size_t(width) + size_t(i)] - mean, 2);
        var /= double(width);
        for (int64_t i = 0; i < width; ++i)
            y[r * size_t(width) + size_t(i)] =
                (x[r * size_t(width) + size_t(i)] - mean) / std::sqrt(var + 1e-6) * w[size_t(i)] + b[size_t(i)];
    }
    return y;
}

double gelu_tanh(double e) { return 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e))); }
double gelu_erf(double e) { return 0.5 * e * (1 + std::erf(e / std::sqrt(2.0))); }

std::vector<double> host_tower(const gguf::File& f, const vision::Patches& p, int64_t d, int64_t heads, int64_t ff,
                               int64_t layers, int64_t text, int64_t grid, const std::vector<int>& deepstack) {
    const int64_t n = p.count(), hd = d / heads, q4 = hd / 4, t = n / 4, m = 4 * d;
    // Each row's patch (row, column) from the merge-window order.
    std::vector<int64_t> py(static_cast<size_t>(n)), px(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
        const int64_t block = r / 4, in = r % 4, blocks_w = p.grid_w / 2;
        py[size_t(r)] = (block / blocks_w) * 2 + in / 2;
        px[size_t(r)] = (block % blocks_w) * 2 + in % 2;
    }
    auto w0 = tensor(f, "v.patch_embd.weight");
    const auto w1 = tensor(f, "v.patch_embd.weight.1");
    for (size_t i = 0; i < w0.size(); ++i) w0[i] += w1[i];
    Matrix x = linear(Matrix(p.rows.begin(), p.rows.end()), n, p.row_size(), w0, d, tensor(f, "v.patch_embd.bias"));
    const auto table = tensor(f, "v.position_embd.weight");
    auto coord = [&](int64_t i, int64_t size) { return size == 1 ? 0.0 : double(float(double(i) * double(grid - 1) / double(size - 1))); };
    for (int64_t r = 0; r < n; ++r) {
        const double y = coord(py[size_t(r)], p.grid_h), xx = coord(px[size_t(r)], p.grid_w);
        const auto y0 = int64_t(y), x0 = int64_t(xx);
        const int64_t y1 = std::min(y0 + 1, grid - 1), x1 = std::min(x0 + 1, grid - 1);
        const double fy = y - double(y0), fx = xx - double(x0);
        for (int64_t i = 0; i < d; ++i)
            x[size_t(r * d + i)] += (1 - fy) * (1 - fx) * table[size_t((y0 * grid + x0) * d + i)] +
                                    (1 - fy) * fx * table[size_t((y0 * grid + x1) * d + i)] +
                                    fy * (1 - fx) * table[size_t((y1 * grid + x0) * d + i)] +
                                    fy * fx * table[size_t((y1 * grid + x1) * d + i)];
    }
    auto merger = [&](const Matrix& in, const std::string& norm, const std::string& fc1, const std::string& fc2, bool after) {
        const Matrix normed = after ? layer_norm(in, m, tensor(f, norm + ".weight"), tensor(f, norm + ".bias"))
                                    : layer_norm(in, d, tensor(f, norm + ".weight"), tensor(f, norm + ".bias"));
        Matrix h = linear(normed, t, m, tensor(f, fc1 + ".weight"), m, tensor(f, fc1 + ".bias"));
        for (double& e : h) e = gelu_erf(e);
        return linear(h, t, m, tensor(f, fc2 + ".weight"), text, tensor(f, fc2 + ".bias"));
    };
    std::vector<Matrix> slices(1);
    for (int64_t l = 0; l < layers; ++l) {
        const std::string b = "v.blk." + std::to_string(l) + ".";
        auto w = [&](const std::string& name) { return tensor(f, b + name); };
        const Matrix h = layer_norm(x, d, w("ln1.weight"), w("ln1.bias"));
        const auto qkv_w = w("attn_qkv.weight"), qkv_b = w("attn_qkv.bias");
        Matrix q = linear(h, n, d, qkv_w, d, qkv_b, 0), k = linear(h, n, d, qkv_w, d, qkv_b, d),
               v = linear(h, n, d, qkv_w, d, qkv_b, 2 * d);
        for (Matrix* z : {&q, &k})
            for (int64_t r = 0; r < n; ++r)
                for (int64_t head = 0; head < heads; ++head)
                    for (int64_t i = 0; i < 2 * q4; ++i) {  // rotate_half over the head: (i, i + hd/2)
                        const double pos = i < q4 ? double(py[size_t(r)]) : double(px[size_t(r)]);
                        const double angle = pos * std::pow(10000.0, -double(2 * (i % q4)) / double(2 * q4));
                        double& a = (*z)[size_t(r * d + head * hd + i)];
                        double& c = (*z)[size_t(r * d + head * hd + i + hd / 2)];
                        const double a0 = a, c0 = c;
                        a = a0 * std::cos(angle) - c0 * std::sin(angle);
                        c = a0 * std::sin(angle) + c0 * std::cos(angle);
                    }
        Matrix a(size_t(n * d));
        for (int64_t head = 0; head < heads; ++head)
            for (int64_t i = 0; i < n; ++i) {
                std::vector<double> s(static_cast<size_t>(n));
                double mx = -1e300, total = 0;
                for (int64_t j = 0; j < n; ++j) {
                    double dot = 0;
                    for (int64_t e = 0; e < hd; ++e) dot += q[size_t(i * d + head * hd + e)] * k[size_t(j * d + head * hd + e)];
                    mx = std::max(mx, s[size_t(j)] = dot / std::sqrt(double(hd)));
                }
                for (auto& e : s) total += (e = std::exp(e - mx));
                for (int64_t j = 0; j < n; ++j)
                    for (int64_t e = 0; e < hd; ++e) a[size_t(i * d + head * hd + e)] += s[size_t(j)] / total * v[size_t(j * d + head * hd + e)];
            }
        const Matrix o = linear(a, n, d, w("attn_out.weight"), d, w("attn_out.bias"));
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
        Matrix u = linear(layer_norm(x, d, w("ln2.weight"), w("ln2.bias")), n, d, w("ffn_up.weight"), ff, w("ffn_up.bias"));
        for (double& e : u) e = gelu_tanh(e);
        const Matrix down = linear(u, n, ff, w("ffn_down.weight"), d, w("ffn_down.bias"));
        for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
        if (std::find(deepstack.begin(), deepstack.end(), int(l)) != deepstack.end()) {
            const std::string ds = "v.deepstack." + std::to_string(l) + ".";
            slices.push_back(merger(x, ds + "norm", ds + "fc1", ds + "fc2", true));
        }
    }
    slices[0] = merger(x, "v.post_ln", "mm.0", "mm.2", false);
    std::vector<double> out;
    for (int64_t r = 0; r < t; ++r)
        for (const Matrix& s : slices) out.insert(out.end(), s.begin() + r * text, s.begin() + (r + 1) * text);
    return out;
}

TEST(Qwen3VlTower, BackendsEqualTheHostFormulas) {
    vision::RandomMmprojSpec s;
    s.projector = "qwen3vl_merger";
    s.patch_size = 4; s.n_embd = 32; s.n_ff = 40; s.n_layers = 2; s.n_heads = 2; s.text_dim = 16;
    s.pos_grid = 5; s.min_pixels = 256; s.max_pixels = 1024; s.n_deepstack = 1;
    gguf::Writer w;
    vision::build_random_mmproj(s, w);
    const auto file = w.view("mmproj.gguf");
    std::mt19937 rng(11);
    vision::Image im{.width = 27, .height = 17, .rgb = std::vector<uint8_t>(27 * 17 * 3)};
    for (auto& v : im.rgb) v = uint8_t(rng() % 256);
    auto cpu_b = backend::make_backend("cpu"), ref_b = backend::make_backend("reference");
    vision::Qwen3VlTower cpu(*file, *cpu_b), ref(*file, *ref_b);
    const auto& c = cpu.config();
    // 27 x 17 -> 24 x 16 (factor 8): a 6 x 4 patch grid (not square), 6 tokens.
    const vision::Patches p = vision::qwen3vl_preprocess(im, c.patch_size, c.merge, c.min_pixels, c.max_pixels, c.norm);
    ASSERT_EQ(p.grid_w, 6);
    ASSERT_EQ(p.grid_h, 4);
    const std::vector<double> want = host_tower(*file, p, 32, 2, 40, 2, 16, 5, {0});
    const std::vector<float> got_ref = ref.encode(p), got_cpu = cpu.encode(p);
    ASSERT_EQ(got_ref.size(), want.size());
    double scale = 0, err_ref = 0, err_cpu = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::fabs(want[i]));
        err_ref = std::max(err_ref, std::fabs(double(got_ref[i]) - want[i]));
        err_cpu = std::max(err_cpu, std::fabs(double(got_cpu[i]) - want[i]));
    }
    EXPECT_LT(err_ref / scale, 1e-5);
    EXPECT_LT(err_cpu / scale, 1e-4);
}

}  // namespace
}  // namespace pagoda::test
