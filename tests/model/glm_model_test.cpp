// glm4moe (GLM-4.5), glm4 (GLM-4-0414), smollm3 and mistral3 (Ministral 3) end to end, as gen-model
// writes them with llama.cpp's names and keys: the reference backend's logits against a direct
// evaluation of each architecture's equations written out here from the file's tensors (no pagoda
// graph code: Q/K/V biases, per-head Q/K norms, partial RoPE in NEOX or adjacent pairs, glm4's
// sandwich norms and fused gate|up, glm4moe's post_attention_norm before the FFN, smollm3's NoPE
// layers); the CPU backend against the reference, fused and unfused, F32 and Q8_0, prefill and
// decode. Layouts and errors: glm_layout_test.cpp.
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/thread_pool.h"
#include "direct_equations.h"
#include "fixtures.h"
#include "glm_test_util.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

using glm_test::dense_spec;
using glm_test::glm4moe_spec;
using glm_test::prompt;
using glm_test::reference_logits;

// --- the equations, evaluated directly from an F32 file ------------------------------------------

struct Direct : direct::Weights {
    static void add(std::vector<double>& y, const float* b) {
        for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    }
    // The first `dims` values of the head at v[at..] rotated by pos * theta^(-2i/dims): pairs (i, i + dims/2)
    // for NEOX, (2i, 2i + 1) otherwise.
    static void rope(std::vector<double>& v, size_t at, int64_t dims, int64_t pos, double theta, bool neox) {
        for (int64_t i = 0; i < dims / 2; ++i) {
            const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(dims));
            const size_t i0 = at + size_t(neox ? i : 2 * i), i1 = at + size_t(neox ? i + dims / 2 : 2 * i + 1);
            const double x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * std::cos(a) - x1 * std::sin(a);
            v[i1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
    }
    static std::vector<double> swiglu(const std::vector<double>& g, const std::vector<double>& u) {
        std::vector<double> y(g.size());
        for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
        return y;
    }

    // The logits of every position of `ids` (glm4moe: every layer dense, leading_dense = block count).
    // temp_beta != 0: each query, after RoPE, times 1 + temp_beta ln(1 + floor(pos / temp_length))
    // (mistral3's attention temperature).
    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids, double temp_beta = 0,
                               int64_t temp_length = 1) const {
        const int64_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, r = c.rope_dims, T = int64_t(ids.size());
        const bool neox = c.arch == "glm4moe", glm4 = c.arch == "glm4";
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x = embed(ids, c.dim);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            const bool use_rope = c.arch != "smollm3" || (l + 1) % 4 != 0;
            std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
            for (int64_t s = 0; s < T; ++s) {
                const auto h = rms_norm(x[size_t(s)], tensor(p + "attn_norm.weight"), eps);
                q[size_t(s)] = mul(tensor(p + "attn_q.weight"), h, H * hd);
                k[size_t(s)] = mul(tensor(p + "attn_k.weight"), h, KV * hd);
                v[size_t(s)] = mul(tensor(p + "attn_v.weight"), h, KV * hd);
                if (has(p + "attn_q.bias")) {
                    add(q[size_t(s)], tensor(p + "attn_q.bias"));
                    add(k[size_t(s)], tensor(p + "attn_k.bias"));
                    add(v[size_t(s)], tensor(p + "attn_v.bias"));
                }
                for (auto [vec, heads, w] : {std::tuple{&q[size_t(s)], H, "attn_q_norm"}, std::tuple{&k[size_t(s)], KV, "attn_k_norm"}})
                    for (int64_t hh = 0; hh < heads; ++hh) {
                        if (has(p + w + ".weight")) {
                            const auto n = rms_norm(vec->data() + hh * hd, size_t(hd), tensor(p + w + ".weight"), eps);
                            std::copy(n.begin(), n.end(), vec->begin() + hh * hd);
                        }
                        if (use_rope) rope(*vec, size_t(hh * hd), r, s, c.rope_theta, neox);
                    }
                const double temperature = 1 + temp_beta * std::log(1 + std::floor(double(s) / double(temp_length)));
                for (double& value : q[size_t(s)]) value *= temperature;
            }
            for (int64_t s = 0; s < T; ++s) {
                std::vector<double> out = direct::attend(q, k, v, s, H, KV, hd, hd, std::sqrt(double(hd)));
                auto o = mul(tensor(p + "attn_output.weight"), out, c.dim);
                if (glm4) o = rms_norm(o, tensor(p + "post_attention_norm.weight"), eps);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
                const auto fin = rms_norm(x[size_t(s)], tensor(p + (neox ? "post_attention_norm" : "ffn_norm") + ".weight"), eps);
                std::vector<double> y;
                if (glm4) {  // ffn_up = [gate rows; up rows]
                    const float* up = tensor(p + "ffn_up.weight");
                    y = mul(tensor(p + "ffn_down.weight"), swiglu(mul(up, fin, c.ffn_dim), mul(up, fin, c.ffn_dim, c.ffn_dim)), c.dim);
                    y = rms_norm(y, tensor(p + "post_ffw_norm.weight"), eps);
                } else {
                    y = mul(tensor(p + "ffn_down.weight"),
                            swiglu(mul(tensor(p + "ffn_gate.weight"), fin, c.ffn_dim), mul(tensor(p + "ffn_up.weight"), fin, c.ffn_dim)),
                            c.dim);
                }
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += y[size_t(i)];
            }
        }
        return output_logits(x, eps, c.vocab_size);
    }
};

void expect_direct(const RandomModelSpec& spec, const std::string& name) {
    const std::string path = test::temp_path("glm_direct_" + name + ".gguf");
    write_random_model(spec, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    const std::vector<int32_t> ids = prompt(9);
    const auto want = Direct{*file}.logits(cfg, ids);
    const auto got = reference_logits(path, ids);
    direct::expect_logits_near(got, want, 1e-4, name);
}

TEST(GlmDirect, ReferenceBackendComputesEachArchitecturesEquations) {
    RandomModelSpec moe = glm4moe_spec(61);
    moe.leading_dense = moe.n_layers;  // the attention side, biases, Q/K norms and post_attention_norm FFN input
    expect_direct(moe, "glm4moe");
    RandomModelSpec air = moe;
    air.qk_norm = false;
    expect_direct(air, "glm4moe_air");
    expect_direct(dense_spec("glm4", 62), "glm4");
    expect_direct(dense_spec("smollm3", 63), "smollm3");
}

// mistral3's attention temperature: a file with plain RoPE (the YaRN keys dropped, so the equations
// above apply) and rope.scaling.original_context_length 5 runs 23 positions, four steps of the floor;
// the reference's logits are the equations' with each query scaled by its position's temperature, and
// differ from the equations' without it past position 4 only.
TEST(GlmDirect, Mistral3AttentionTemperature) {
    RandomModelSpec spec = dense_spec("mistral3", 64);
    const std::string yarn = test::temp_path("glm_direct_mistral3_yarn.gguf");
    const std::string path = test::temp_path("glm_direct_mistral3.gguf");
    write_random_model(spec, nullptr, yarn);
    {
        auto in = gguf::File::open(yarn);
        gguf::Writer w;
        for (const auto& [key, value] : in->metadata())
            if (key.rfind("mistral3.rope.scaling.", 0) != 0) w.set(key, value);
        w.set("mistral3.rope.scaling.original_context_length", gguf::Value::u32(5));
        for (const auto& t : in->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
        w.write(path);
    }
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    ASSERT_EQ(cfg.rope_scaling, "none");
    const double beta = file->get_float("mistral3.attention.temperature_scale");
    ASSERT_NEAR(beta, 0.1, 1e-7);
    const std::vector<int32_t> ids = prompt(23);
    const auto want = Direct{*file}.logits(cfg, ids, beta, 5);
    const auto got = reference_logits(path, ids);
    direct::expect_logits_near(got, want, 1e-4, "mistral3 temperature");
    const auto plain = Direct{*file}.logits(cfg, ids);
    const size_t vocab = size_t(cfg.vocab_size);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
        double diff = 0;
        for (size_t i = 0; i < vocab; ++i) diff = std::max(diff, std::fabs(want[pos * vocab + i] - plain[pos * vocab + i]));
        if (pos < 5) {
            EXPECT_EQ(diff, 0) << pos;
        } else {
            EXPECT_GT(diff, 1e-3) << pos;
        }
    }
}

// --- the CPU backend against the reference -------------------------------------------------------

struct Case {
    std::string name;
    std::string arch;
    std::string quant;
    bool fusion;
    double tolerance;
};

std::string model_path(const Case& c) {
    const RandomModelSpec spec = c.arch == "glm4moe" ? glm4moe_spec(71) : dense_spec(c.arch, 71);
    return model_compare::write_model(spec, "glm_" + c.name, c.quant);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GlmModel : public ::testing::TestWithParam<Case> {};

TEST_P(GlmModel, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    const std::string path = model_path(c);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.arch, c.arch);
    EXPECT_EQ(cfg.rope_style, c.arch == "glm4moe" ? RopeStyle::neox : RopeStyle::normal);
    if (c.arch == "glm4" || c.arch == "glm4moe") {
        EXPECT_EQ(cfg.rope_dims, 16);  // half of the 32-wide heads
    }
    EXPECT_EQ(cfg.rope_scaling, c.arch == "mistral3" ? "yarn" : "none");
    model_compare::expect_cpu_matches_reference(file, c.fusion, c.tolerance);
}

// mistral3 past its original context (6 here): 29 positions over four temperature steps, the CPU's
// fused and unfused graphs against the reference, prefill and decode.
TEST(GlmModelTemperature, Mistral3PastTheOriginalContextMatchesTheReference) {
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    RandomModelSpec spec = dense_spec("mistral3", 73);
    spec.original_context = 6;
    const std::string path = model_compare::write_model(spec, "glm_mistral3_temperature");
    const std::vector<int32_t> ids = prompt(29);
    const std::vector<float> expected = reference_logits(path, ids);
    for (const bool fusion : {true, false}) {
        auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                            .tokens_wanted = 128, .fusion = fusion});
        model_compare::expect_matches_reference(*model, expected, ids, 1e-5);
    }
}

INSTANTIATE_TEST_SUITE_P(RandomModels, GlmModel,
                         ::testing::Values(Case{"glm4moe_f32", "glm4moe", "", true, 1e-5},
                                           Case{"glm4moe_f32_unfused", "glm4moe", "", false, 1e-5},
                                           Case{"glm4moe_q8_0", "glm4moe", "q8_0", true, 3e-2},
                                           Case{"glm4moe_q8_0_unfused", "glm4moe", "q8_0", false, 3e-2},
                                           Case{"glm4_f32", "glm4", "", true, 1e-5},
                                           Case{"glm4_f32_unfused", "glm4", "", false, 1e-5},
                                           Case{"glm4_q8_0", "glm4", "q8_0", true, 3e-2},
                                           Case{"smollm3_f32", "smollm3", "", true, 1e-5},
                                           Case{"smollm3_q8_0_unfused", "smollm3", "q8_0", false, 3e-2},
                                           Case{"mistral3_f32", "mistral3", "", true, 1e-5},
                                           Case{"mistral3_q8_0_unfused", "mistral3", "q8_0", false, 3e-2}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pagoda::model
