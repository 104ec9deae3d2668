// minimax-m2 (MiniMax-M2) end to end, as gen-model writes it with llama.cpp's names and keys: the
// reference backend's logits against a direct evaluation of the architecture's equations written out
// here from the file's tensors (no pagoda graph code: Q and K RMS-normed over their whole projected
// rows before the split into heads, NEOX RoPE over half of each head, a sigmoid router whose top-k
// selection adds exp_probs_b while the weights are the plain sigmoid scores renormalised, SwiGLU
// experts); the CPU backend against the reference, fused and unfused, F32 and Q8_0, prefill and
// decode; and load errors naming the missing or misshapen tensor.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "direct_equations.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model_compare.h"

namespace pagoda::model {
namespace {

using gguf_edit::rewrite;
using gguf_edit::without;
using gguf_edit::load_error;

using model_compare::prompt;
using model_compare::reference_logits;

RandomModelSpec minimax_spec(uint64_t seed) {
    RandomModelSpec s;
    s.arch = "minimax-m2";
    s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 32; s.ffn_dim = 96; s.vocab_size = 300;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.seed = seed;
    return s;
}

// --- the equations, evaluated directly from an F32 file ------------------------------------------

struct Direct : direct::Weights {
    bool per_head_norm = false;  // the qwen3-style alternative, to show the test tells the two apart

    // One RMS over the whole row (minimax-m2), or one per head of hd values (per_head_norm).
    void qk_norm(std::vector<double>& v, const float* w, int64_t hd, double eps) const {
        const size_t span = per_head_norm ? size_t(hd) : v.size();
        for (size_t at = 0; at < v.size(); at += span) {
            const auto n = rms_norm(v.data() + at, span, w + at, eps);
            std::copy(n.begin(), n.end(), v.begin() + std::ptrdiff_t(at));
        }
    }
    // NEOX: the first `dims` values of the head at v[at..], pairs (i, i + dims/2), angle pos * theta^(-2i/dims).
    static void rope(std::vector<double>& v, size_t at, int64_t dims, int64_t pos, double theta) {
        for (int64_t i = 0; i < dims / 2; ++i) {
            const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(dims));
            const size_t i0 = at + size_t(i), i1 = at + size_t(i + dims / 2);
            const double x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * std::cos(a) - x1 * std::sin(a);
            v[i1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
    }
    // sigmoid router: choose the top k of sigmoid(logit) + bias, weight each chosen expert by its
    // sigmoid(logit) over the chosen ones' sum; each expert down(silu(gate h) * up h).
    std::vector<double> moe(const ModelConfig& c, const std::string& p, const std::vector<double>& h) const {
        const int64_t E = c.n_experts, f = c.expert_ffn_dim;
        const auto logit = mul(tensor(p + "ffn_gate_inp.weight"), h, E);
        const float* bias = tensor(p + "exp_probs_b.bias");
        std::vector<double> score(static_cast<size_t>(E)), key(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) {
            score[size_t(e)] = 1 / (1 + std::exp(-logit[size_t(e)]));
            key[size_t(e)] = score[size_t(e)] + bias[e];
        }
        std::vector<int64_t> order(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key[size_t(a)] > key[size_t(b)]; });
        double sum = 0;
        for (int64_t j = 0; j < c.n_experts_used; ++j) sum += score[size_t(order[size_t(j)])];
        std::vector<double> y(size_t(c.dim), 0.0);
        for (int64_t j = 0; j < c.n_experts_used; ++j) {
            const int64_t e = order[size_t(j)];
            const auto g = mul(tensor(p + "ffn_gate_exps.weight") + e * f * c.dim, h, f);
            const auto u = mul(tensor(p + "ffn_up_exps.weight") + e * f * c.dim, h, f);
            std::vector<double> a(static_cast<size_t>(f));
            for (size_t i = 0; i < a.size(); ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
            const auto d = mul(tensor(p + "ffn_down_exps.weight") + e * f * c.dim, a, c.dim);
            for (size_t i = 0; i < y.size(); ++i) y[i] += score[size_t(e)] / sum * d[i];
        }
        return y;
    }

    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids) const {
        const int64_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, T = int64_t(ids.size());
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x = embed(ids, c.dim);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            direct::Rows q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
            for (int64_t s = 0; s < T; ++s) {
                const auto h = rms_norm(x[size_t(s)], tensor(p + "attn_norm.weight"), eps);
                q[size_t(s)] = mul(tensor(p + "attn_q.weight"), h, H * hd);
                k[size_t(s)] = mul(tensor(p + "attn_k.weight"), h, KV * hd);
                v[size_t(s)] = mul(tensor(p + "attn_v.weight"), h, KV * hd);
                qk_norm(q[size_t(s)], tensor(p + "attn_q_norm.weight"), hd, eps);
                qk_norm(k[size_t(s)], tensor(p + "attn_k_norm.weight"), hd, eps);
                for (int64_t hh = 0; hh < H; ++hh) rope(q[size_t(s)], size_t(hh * hd), c.rope_dims, s, c.rope_theta);
                for (int64_t hh = 0; hh < KV; ++hh) rope(k[size_t(s)], size_t(hh * hd), c.rope_dims, s, c.rope_theta);
            }
            for (int64_t s = 0; s < T; ++s) {
                const auto a = direct::attend(q, k, v, s, H, KV, hd, hd, std::sqrt(double(hd)));
                const auto o = mul(tensor(p + "attn_output.weight"), a, c.dim);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
                const auto y = moe(c, p, rms_norm(x[size_t(s)], tensor(p + "ffn_norm.weight"), eps));
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += y[size_t(i)];
            }
        }
        return output_logits(x, eps, c.vocab_size);
    }
};

TEST(MiniMaxM2Direct, ReferenceBackendComputesTheEquations) {
    const std::string path = test::temp_path("minimax_direct.gguf");
    write_random_model(minimax_spec(61), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.rope_dims, 16);  // half of the 32-wide heads
    EXPECT_EQ(cfg.expert_gating, 2);  // sigmoid
    EXPECT_TRUE(cfg.expert_weights_norm);  // no key in the file: the architecture's default
    const std::vector<int32_t> ids = prompt(9);
    const auto want = Direct{{*file}}.logits(cfg, ids);
    const auto got = reference_logits(path, ids);
    direct::expect_logits_near(got, want, 1e-4, "minimax-m2");
    // The whole-row norm is what the comparison checks: per-head norms give logits far outside it.
    const auto per_head = Direct{{*file}, true}.logits(cfg, ids);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(per_head[i] - want[i]));
    EXPECT_GT(worst, 1e-2 * direct::largest_abs(want));
}

// --- the CPU backend against the reference -------------------------------------------------------

struct Case {
    std::string name, quant;
    bool fusion;
    double tolerance;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MiniMaxM2Model : public ::testing::TestWithParam<Case> {};

TEST_P(MiniMaxM2Model, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    const std::string path = model_compare::write_model(minimax_spec(71), "minimax_" + c.name, c.quant);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    EXPECT_EQ(read_config(*file).arch, "minimax-m2");
    model_compare::expect_cpu_matches_reference(file, c.fusion, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, MiniMaxM2Model,
                         ::testing::Values(Case{"f32", "", true, 1e-5}, Case{"f32_unfused", "", false, 1e-5},
                                           Case{"q8_0", "q8_0", true, 3e-2}, Case{"q8_0_unfused", "q8_0", false, 3e-2}),
                         [](const auto& info) { return info.param.name; });

// --- load errors ---------------------------------------------------------------------------------

TEST(MiniMaxM2Errors, NameTheMissingOrMisshapenTensor) {
    const std::string full = test::temp_path("minimax_errors.gguf"), bad = test::temp_path("minimax_errors_cut.gguf");
    write_random_model(minimax_spec(93), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    for (const std::string tensor : {"blk.1.exp_probs_b.bias", "blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight",
                                     "blk.0.ffn_gate_inp.weight", "blk.1.ffn_down_exps.weight"}) {
        without(full, bad, tensor);
        EXPECT_NE(load_error(bad).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(bad);
    }
    // A per-head Q norm (qwen3's [head_dim]) where minimax-m2 has one over the whole row [n_heads x head_dim].
    rewrite(full, bad, {.cut = "blk.0.attn_q_norm.weight", .cut_values = 32});
    EXPECT_NE(load_error(bad).find("tensor blk.0.attn_q_norm.weight has shape"), std::string::npos) << load_error(bad);
}

}  // namespace
}  // namespace pagoda::model
