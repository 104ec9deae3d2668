// The Gemma 3 vision tower (vision/vision_tower.h) on gen-model's random mmproj: the CPU backend's image
// embeddings equal the reference backend's, and both equal a plain host implementation of SigLIP +
// Gemma 3's projector written here from the formulas (double precision, no backend), which checks
// the composition the backends cannot: patch order, positions, bidirectional attention, tanh GELU,
// pooling orientation and the projection's transpose.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "vision/preprocess.h"
#include "vision/random_mmproj.h"
#include "vision/vision_tower.h"

namespace pagoda::test {
namespace {

using Matrix = std::vector<double>;  // row-major

std::vector<double> tensor(const gguf::File& f, const std::string& name) {
    const auto* t = f.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, gguf::GgmlType::F32);
    std::vector<float> v(size_t(t->n_elements()));
    std::memcpy(v.data(), t->data, v.size() * 4);
    return {v.begin(), v.end()};
}

// y[r][o] = sum_i x[r][i] * w[o][i] + b[o]   (w: out rows of in, as GGUF [in, out] stores it)
Matrix linear(const Matrix& x, int64_t rows, int64_t in, const std::vector<double>& w, int64_t out,
              const std::vector<double>* b) {
    Matrix y(size_t(rows * out));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
            double s = b ? (*b)[size_t(o)] : 0;
            for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t(o * in + i)];
            y[size_t(r * out + o)] = s;
        }
    return y;
}

Matrix layer_norm(const Matrix& x, int64_t rows, int64_t d, const std::vector<double>& w, const std::vector<double>& b,
                  double eps) {
    Matrix y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; ++i) mean += x[size_t(r * d + i)];
        mean /= double(d);
        for (int64_t i = 0; i < d; ++i) var += std::pow(x[size_t(r * d + i)] - mean, 2);
        var /= double(d);
        for (int64_t i = 0; i < d; ++i)
            y[size_t(r * d + i)] = (x[size_t(r * d + i)] - mean) / std::sqrt(var + eps) * w[size_t(i)] + b[size_t(i)];
    }
    return y;
}

std::vector<double> host_tower(const gguf::File& f, const vision::VisionConfig& c, const vision::Patches& p) {
    const int64_t n = c.n_patches(), d = c.n_embd, hd = c.head_dim(), ff = c.n_ff;
    const Matrix pixels(p.rows.begin(), p.rows.end());
    const auto patch_b = tensor(f, "v.patch_embd.bias");
    Matrix x = linear(pixels, n, p.row_size(), tensor(f, "v.patch_embd.weight"), d, &patch_b);
    const auto pos = tensor(f, "v.position_embd.weight");
    for (size_t i = 0; i < x.size(); ++i) x[i] += pos[i];  // row p of the table for patch p
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string b = "v.blk." + std::to_string(l) + ".";
        auto w = [&](const std::string& name) { return tensor(f, b + name); };
        const Matrix h = layer_norm(x, n, d, w("ln1.weight"), w("ln1.bias"), c.eps);
        const auto qb = w("attn_q.bias"), kb = w("attn_k.bias"), vb = w("attn_v.bias"), ob = w("attn_out.bias");
        const Matrix q = linear(h, n, d, w("attn_q.weight"), d, &qb), k = linear(h, n, d, w("attn_k.weight"), d, &kb),
                     v = linear(h, n, d, w("attn_v.weight"), d, &vb);
        Matrix a(size_t(n * d));
        for (int64_t head = 0; head < c.n_heads; ++head)
            for (int64_t i = 0; i < n; ++i) {
                std::vector<double> s(static_cast<size_t>(n));
                double mx = -1e300, total = 0;
                for (int64_t j = 0; j < n; ++j) {  // every patch attends to every patch
                    double dot = 0;
                    for (int64_t e = 0; e < hd; ++e) dot += q[size_t(i * d + head * hd + e)] * k[size_t(j * d + head * hd + e)];
                    s[size_t(j)] = dot / std::sqrt(double(hd));
                    mx = std::max(mx, s[size_t(j)]);
                }
                for (auto& e : s) total += (e = std::exp(e - mx));
                for (int64_t j = 0; j < n; ++j)
                    for (int64_t e = 0; e < hd; ++e)
                        a[size_t(i * d + head * hd + e)] += s[size_t(j)] / total * v[size_t(j * d + head * hd + e)];
            }
        const Matrix o = linear(a, n, d, w("attn_out.weight"), d, &ob);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
        const Matrix h2 = layer_norm(x, n, d, w("ln2.weight"), w("ln2.bias"), c.eps);
        const auto ub = w("ffn_up.bias"), db = w("ffn_down.bias");
        Matrix u = linear(h2, n, d, w("ffn_up.weight"), ff, &ub);
        for (double& e : u) e = 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
        const Matrix down = linear(u, n, ff, w("ffn_down.weight"), d, &db);
        for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
    }
    x = layer_norm(x, n, d, tensor(f, "v.post_ln.weight"), tensor(f, "v.post_ln.bias"), c.eps);
    // AvgPool2d over the (row, column) patch grid; then RMSNorm * w; then x W with W [d][text].
    const int64_t side = c.patches_per_side(), cells = c.tokens_per_side(), t = c.n_image_tokens();
    Matrix pooled(size_t(t * d));
    for (int64_t py = 0; py < side; ++py)
        for (int64_t px = 0; px < side; ++px)
            for (int64_t i = 0; i < d; ++i)
                pooled[size_t(((py / c.pool) * cells + px / c.pool) * d + i)] +=
                    x[size_t((py * side + px) * d + i)] / double(c.pool * c.pool);
    const auto norm = tensor(f, "mm.soft_emb_norm.weight"), proj = tensor(f, "mm.input_projection.weight");
    std::vector<double> out(size_t(t * c.text_dim));
    for (int64_t r = 0; r < t; ++r) {
        double ms = 0;
        for (int64_t i = 0; i < d; ++i) ms += std::pow(pooled[size_t(r * d + i)], 2);
        const double inv = 1 / std::sqrt(ms / double(d) + c.eps);
        for (int64_t o = 0; o < c.text_dim; ++o)
            for (int64_t i = 0; i < d; ++i)
                out[size_t(r * c.text_dim + o)] += pooled[size_t(r * d + i)] * inv * norm[size_t(i)] * proj[size_t(i * c.text_dim + o)];
    }
    return out;
}

vision::Image noise_image(int64_t w, int64_t h, uint32_t seed) {
    std::mt19937 rng(seed);
    vision::Image im{.width = w, .height = h, .rgb = std::vector<uint8_t>(size_t(w * h * 3))};
    for (auto& v : im.rgb) v = uint8_t(rng() % 256);
    return im;
}

double worst_relative(const std::vector<float>& got, const std::vector<double>& want) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        err = std::max(err, std::fabs(double(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
    }
    return err / scale;
}

TEST(VisionTower, CpuEqualsReferenceEqualsHostFormulas) {
    gguf::Writer w;
    vision::build_random_mmproj({.n_embd = 32, .n_ff = 72, .n_layers = 2, .n_heads = 4, .text_dim = 48}, w);
    const auto file = w.view("mmproj.gguf");
    auto cpu_backend = backend::make_backend("cpu"), ref_backend = backend::make_backend("reference");
    vision::VisionTower cpu(*file, *cpu_backend), ref(*file, *ref_backend);
    const auto& c = cpu.config();
    // A 50x70 image: not square and not the tower's size, so the resize runs on both axes.
    const vision::Patches patches = vision::siglip_preprocess(noise_image(50, 70, 3), c.image_size, c.patch_size, c.norm);
    const std::vector<float> got = cpu.encode(patches), want = ref.encode(patches);
    ASSERT_EQ(got.size(), size_t(16 * 48));
    ASSERT_EQ(want.size(), got.size());
    const std::vector<double> want_d(want.begin(), want.end());
    EXPECT_LT(worst_relative(got, want_d), 1e-4) << "cpu vs reference";
    const std::vector<double> host = host_tower(*file, c, patches);
    EXPECT_LT(worst_relative(want, host), 1e-5) << "reference vs the host formulas";
    EXPECT_LT(worst_relative(got, host), 1e-4) << "cpu vs the host formulas";
    // Deterministic: a second encode of the same patches is bitwise the same.
    EXPECT_EQ(cpu.encode(patches), got);
}

TEST(VisionTower, F16ProjectorCpuEqualsReference) {
    // mmproj files are usually F16 (the converter's default): the same agreement at F16's tolerance.
    gguf::Writer w;
    vision::build_random_mmproj({.type = gguf::GgmlType::F16}, w);
    const auto file = w.view("mmproj.gguf");
    auto cpu_backend = backend::make_backend("cpu"), ref_backend = backend::make_backend("reference");
    vision::VisionTower cpu(*file, *cpu_backend), ref(*file, *ref_backend);
    const auto& c = cpu.config();
    const vision::Patches patches = vision::siglip_preprocess(noise_image(64, 64, 9), c.image_size, c.patch_size, c.norm);
    const std::vector<float> got = cpu.encode(patches), want = ref.encode(patches);
    EXPECT_LT(worst_relative(got, std::vector<double>(want.begin(), want.end())), 1e-2);
}

TEST(VisionTower, EveryPatchReachesEveryToken) {
    // Bidirectional attention: changing the last patch's pixels changes the first image token.
    gguf::Writer w;
    vision::build_random_mmproj({}, w);
    const auto file = w.view("mmproj.gguf");
    auto b = backend::make_backend("cpu");
    vision::VisionTower tower(*file, *b);
    const auto& c = tower.config();
    vision::Patches p = vision::siglip_preprocess(noise_image(64, 64, 5), c.image_size, c.patch_size, c.norm);
    const auto before = tower.encode(p);
    for (int64_t i = 0; i < p.row_size(); ++i) p.rows[size_t((p.count() - 1) * p.row_size() + i)] *= -1;
    const auto after = tower.encode(p);
    bool first_changed = false;
    for (int64_t i = 0; i < c.text_dim; ++i) first_changed |= before[size_t(i)] != after[size_t(i)];
    EXPECT_TRUE(first_changed);
}

TEST(VisionTower, RefusesPatchesOfAnotherShape) {
    gguf::Writer w;
    vision::build_random_mmproj({}, w);
    const auto file = w.view("mmproj.gguf");
    auto b = backend::make_backend("cpu");
    vision::VisionTower tower(*file, *b);
    const vision::Patches p = vision::siglip_preprocess(noise_image(32, 32, 1), 32, 8, {});
    try {
        tower.encode(p);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "vision tower: 16 patches of 8x8 given, the tower takes 64 of 8x8");
    }
}

}  // namespace
}  // namespace pagoda::test
