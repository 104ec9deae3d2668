// deepseek2 (multi-head latent attention, leading dense layers, routed plus shared experts) end to
// end, as gen-model writes it with llama.cpp's names and keys: the graph's logits on the reference
// backend against a direct evaluation of the MLA equations written out here from the file's tensors
// (no pagoda graph code); the CPU backend against the reference, fused and unfused, for V3's form
// (q bottleneck, sigmoid router with correction bias, groups, routed scale, YaRN) and V2-Lite's
// (plain attn_q, softmax), F32 and Q8_0; newer converters' attn_k_b / attn_v_b split loading to the
// same logits as attn_kv_b; Mistral-Large-3's attention temperature against the equations and the CPU
// against the reference with it; the YaRN scale and the cache shape; Vulkan's refusal naming copy_columns;
// and load errors naming the key.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "direct_equations.h"
#include "model_compare.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

using gguf_edit::rewrite;
using gguf_edit::without;
using gguf_edit::load_error;

using model_compare::prompt;
using model_compare::reference_logits;

// V3's form, small: 4 heads of nope 16 + rope 8, v 16, kv rank 32, q rank 32, 3 layers (1 dense).
RandomModelSpec v3_spec(uint64_t seed) {
    RandomModelSpec s;
    s.arch = "deepseek2";
    s.n_layers = 3; s.dim = 64; s.n_heads = 4; s.head_dim = 24; s.ffn_dim = 96; s.vocab_size = 300;
    s.mla_rope_dims = 8; s.v_head_dim = 16; s.kv_lora_rank = 32; s.q_lora_rank = 32;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.n_shared_experts = 1; s.leading_dense = 1;
    s.expert_gating = 2; s.expert_groups = 4; s.expert_groups_used = 2; s.expert_weights_scale = 2.5f;
    s.expert_weights_norm = true; s.yarn = true; s.seed = seed;
    return s;
}

// V2-Lite's form: a plain attn_q, softmax routing without renormalisation.
RandomModelSpec lite_spec(uint64_t seed) {
    RandomModelSpec s = v3_spec(seed);
    s.q_lora_rank = 0; s.expert_gating = 1; s.expert_groups = 0; s.expert_groups_used = 0;
    s.expert_weights_scale = 1.0f; s.expert_weights_norm = false; s.yarn = false; s.n_shared_experts = 2;
    return s;
}

// `s` with Mistral-Large-3's attention temperature keys as its converter writes them
// (attention.temperature_scale = beta, attention.temperature_length; gen-model's --attn-temperature-*).
RandomModelSpec with_temperature(RandomModelSpec s, float beta, int64_t length) {
    s.attn_temperature_scale = beta;
    s.attn_temperature_length = length;
    return s;
}

// --- the MLA equations, evaluated directly from an F32 file -------------------------------------

struct Direct : direct::Weights {
    static std::vector<double> norm(const std::vector<double>& x, const float* w, double eps) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1 / std::sqrt(ss / double(x.size()) + eps);
        std::vector<double> y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
        return y;
    }
    // Adjacent pairs (2i, 2i + 1) of v[at .. at + dims) rotated by pos * theta^(-2i/dims).
    static void rope(std::vector<double>& v, size_t at, int64_t dims, int64_t pos, double theta) {
        for (int64_t i = 0; i < dims / 2; ++i) {
            const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(dims));
            const double x0 = v[at + size_t(2 * i)], x1 = v[at + size_t(2 * i + 1)];
            v[at + size_t(2 * i)] = x0 * std::cos(a) - x1 * std::sin(a);
            v[at + size_t(2 * i + 1)] = x0 * std::sin(a) + x1 * std::cos(a);
        }
    }

    // The logits of every position of `ids`, all layers dense (leading_dense = block count), no YaRN.
    // temp_beta != 0: each query, after RoPE, times 1 + temp_beta ln(1 + floor(pos / temp_length))
    // (Mistral-Large-3's attention temperature).
    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids, double temp_beta = 0,
                               int64_t temp_length = 1) const {
        const int64_t H = c.n_heads, nope = c.qk_nope_dim, r = c.rope_dims, v = c.v_head_dim, kvl = c.kv_lora_rank;
        const int64_t hk = nope + r, T = int64_t(ids.size());
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x = embed(ids, c.dim);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), val(static_cast<size_t>(T));
            for (int64_t s = 0; s < T; ++s) {
                const auto h = norm(x[size_t(s)], tensor(p + "attn_norm.weight"), eps);
                q[size_t(s)] = c.q_lora_rank > 0
                                   ? mul(tensor(p + "attn_q_b.weight"),
                                         norm(mul(tensor(p + "attn_q_a.weight"), h, c.q_lora_rank), tensor(p + "attn_q_a_norm.weight"), eps),
                                         H * hk)
                                   : mul(tensor(p + "attn_q.weight"), h, H * hk);
                const auto kva = mul(tensor(p + "attn_kv_a_mqa.weight"), h, kvl + r);
                const auto latent = norm(std::vector<double>(kva.begin(), kva.begin() + kvl), tensor(p + "attn_kv_a_norm.weight"), eps);
                std::vector<double> k_pe(kva.begin() + kvl, kva.end());
                rope(k_pe, 0, r, s, c.rope_theta);
                const auto kv = mul(tensor(p + "attn_kv_b.weight"), latent, H * (nope + v));
                for (int64_t hd = 0; hd < H; ++hd) {
                    rope(q[size_t(s)], size_t(hd * hk + nope), r, s, c.rope_theta);
                    const size_t at = size_t(hd * (nope + v));
                    k[size_t(s)].insert(k[size_t(s)].end(), kv.begin() + long(at), kv.begin() + long(at + size_t(nope)));
                    k[size_t(s)].insert(k[size_t(s)].end(), k_pe.begin(), k_pe.end());
                    val[size_t(s)].insert(val[size_t(s)].end(), kv.begin() + long(at + size_t(nope)),
                                          kv.begin() + long(at + size_t(nope + v)));
                }
                const double temperature = 1 + temp_beta * std::log(1 + std::floor(double(s) / double(temp_length)));
                for (double& value : q[size_t(s)]) value *= temperature;
            }
            for (int64_t s = 0; s < T; ++s) {
                const std::vector<double> out = direct::attend(q, k, val, s, H, H, hk, v, std::sqrt(double(hk)));
                const auto o = mul(tensor(p + "attn_output.weight"), out, c.dim);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
                const auto fin = norm(x[size_t(s)], tensor(p + "ffn_norm.weight"), eps);
                auto g = mul(tensor(p + "ffn_gate.weight"), fin, c.ffn_dim);
                const auto u = mul(tensor(p + "ffn_up.weight"), fin, c.ffn_dim);
                for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
                const auto d = mul(tensor(p + "ffn_down.weight"), g, c.dim);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += d[size_t(i)];
            }
        }
        return output_logits(x, eps, c.vocab_size);
    }
};

TEST(Deepseek2Direct, ReferenceBackendComputesTheMlaEquations) {
    for (const bool q_lora : {true, false}) {
        RandomModelSpec s = q_lora ? v3_spec(61) : lite_spec(61);
        s.yarn = false;
        s.n_layers = 2;
        s.leading_dense = 2;  // the experts are covered by the CPU-vs-reference cases
        const std::string path = test::temp_path(std::string("deepseek2_direct_") + (q_lora ? "q" : "lite") + ".gguf");
        write_random_model(s, nullptr, path);
        auto file = gguf::File::open(path);
        const ModelConfig cfg = read_config(*file);
        const std::vector<int32_t> ids = prompt(9);
        const std::vector<double> want = Direct{*file}.logits(cfg, ids);
        const std::vector<float> got = reference_logits(path, ids);
        ASSERT_GT(direct::largest_abs(want), 0.1);
        direct::expect_logits_near(got, want, 1e-5, q_lora ? "q bottleneck" : "plain q");
    }
}

// Mistral-Large-3's attention temperature (attention.temperature_scale 0.2, temperature_length 4) over
// 15 positions: the reference's logits, in both MLA forms, are the equations' with each query scaled
// by its position's temperature; below position 4 they equal the equations' without it.
TEST(Deepseek2Direct, AttentionTemperatureScalesEachQuery) {
    RandomModelSpec s = v3_spec(62);
    s.yarn = false;
    s.n_layers = 2;
    s.leading_dense = 2;
    const std::string path = test::temp_path("deepseek2_direct_temperature.gguf");
    write_random_model(with_temperature(s, 0.2f, 4), nullptr, path);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    EXPECT_EQ(file->get_int("deepseek2.attention.temperature_length"), 4);
    const ModelConfig cfg = read_config(*file);
    const std::vector<int32_t> ids = prompt(15);
    const std::vector<double> want = Direct{*file}.logits(cfg, ids, 0.2f, 4);
    const std::vector<double> plain = Direct{*file}.logits(cfg, ids);
    const size_t vocab = size_t(cfg.vocab_size);
    for (size_t i = 0; i < 4 * vocab; ++i) ASSERT_EQ(want[i], plain[i]) << i;
    double moved = 0;
    for (size_t i = 4 * vocab; i < want.size(); ++i) moved = std::max(moved, std::fabs(want[i] - plain[i]));
    EXPECT_GT(moved, 1e-3);
    for (const std::string mla : {"absorbed", "naive"}) {
        auto model = open_step_model(file, {.backend = "reference", .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                            .tokens_wanted = 64, .mla = mla});
        SequenceRunner runner(*model, false);
        direct::expect_logits_near(runner.prefill(0, ids, 64, true), want, 1e-5, mla);
    }
}

// --- the CPU backend against the reference ----------------------------------------------------

struct Case {
    std::string name;
    bool lite = false;
    bool split = false;
    std::string quant;  // "" or a `pagoda quantize` target
    bool fusion = true;
    // Max |cpu - reference| relative to the largest |reference logit| (as gpt_oss_model_test).
    double tolerance;
    std::string mla = "absorbed";  // the CPU model's form (the reference runs the default, absorbed)
    bool temperature = false;      // Mistral-Large-3's attention temperature, length 6 (three steps in 19 positions)
};

std::string model_path(const Case& c) {
    RandomModelSpec spec = c.lite ? lite_spec(71) : v3_spec(71);
    spec.mla_split = c.split;
    if (c.temperature) spec = with_temperature(spec, 0.2f, 6);
    return model_compare::write_model(spec, "deepseek2_" + c.name, c.quant);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Deepseek2Model : public ::testing::TestWithParam<Case> {};

TEST_P(Deepseek2Model, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const std::string path = model_path(c);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.arch, "deepseek2");
    EXPECT_EQ(cfg.head_dim, 24);
    EXPECT_EQ(cfg.qk_nope_dim, 16);
    EXPECT_EQ(cfg.v_head_dim, 16);
    EXPECT_EQ(cfg.n_kv_heads, 4);
    EXPECT_EQ(cfg.rope_style, RopeStyle::normal);
    const KvOptions kvo{.block_size = 4, .dtype = kv::KvDtype::f32};
    auto model = open_step_model(file, {.threads = 2, .kv = kvo, .tokens_wanted = 64, .fusion = c.fusion, .mla = c.mla});
    // naive: each head's K and V; absorbed: one latent head [k_pe, c] (rope 8 + kv rank 32), V = K
    const bool naive = c.mla == "naive";
    EXPECT_EQ(model->info().kv_layout.head_dim, naive ? 24 : 40);
    EXPECT_EQ(model->info().kv_layout.n_kv_heads, naive ? 4 : 1);
    EXPECT_EQ(model->info().kv_layout.v_is_k, !naive);
    const std::vector<int32_t> ids = prompt(19);
    const std::vector<float> expected = reference_logits(path, ids);
    model_compare::expect_matches_reference(*model, expected, ids, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Deepseek2Model,
                         ::testing::Values(Case{"v3_f32", false, false, "", true, 1e-5},
                                           Case{"v3_f32_unfused", false, false, "", false, 1e-5},
                                           Case{"lite_f32", true, false, "", true, 1e-5},
                                           Case{"lite_f32_unfused", true, false, "", false, 1e-5},
                                           Case{"v3_split_f32", false, true, "", true, 1e-5},
                                           Case{"v3_q8_0", false, false, "q8_0", true, 3e-2},
                                           Case{"lite_q8_0_unfused", true, false, "q8_0", false, 3e-2},
                                           Case{"v3_f32_naive", false, false, "", true, 1e-5, "naive"},
                                           Case{"lite_split_q8_0_naive", true, true, "q8_0", true, 3e-2, "naive"},
                                           Case{"v3_f32_temperature", false, false, "", true, 1e-5, "absorbed", true},
                                           Case{"v3_f32_temperature_naive_unfused", false, false, "", false, 1e-5, "naive", true}),
                         [](const auto& info) { return info.param.name; });

// Newer converters' attn_k_b / attn_v_b (with key_length_mla / value_length_mla) hold the numbers of
// attn_kv_b split per head (K's part transposed): the same logits.
TEST(Deepseek2Layouts, SplitKvBLoadsLikeTheJoinedOne) {
    std::vector<std::vector<float>> logits;
    for (const bool split : {false, true}) {
        RandomModelSpec s = v3_spec(81);
        s.mla_split = split;
        const std::string path = test::temp_path(std::string("deepseek2_layout_") + (split ? "split" : "joined") + ".gguf");
        write_random_model(s, nullptr, path);
        auto file = gguf::File::open(path);
        EXPECT_EQ(file->find_tensor("blk.0.attn_k_b.weight") != nullptr, split);
        EXPECT_EQ(read_config(*file).head_dim, 24);
        logits.push_back(reference_logits(path, prompt(11)));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    for (size_t i = 0; i < logits[0].size(); ++i) ASSERT_NEAR(logits[0][i], logits[1][i], 1e-9) << i;
}

// The graph: YaRN's mscale^2 / sqrt(nope + rope) on every attention (mscale = 1 + 0.1 ln 40), three
// copy_columns per layer (k_pe repeated, k_nope placed, the output compacted), MoE after the dense layer.
TEST(Deepseek2Graph, YarnScaleAndColumnCopies) {
    const std::string path = test::temp_path("deepseek2_graph.gguf");
    write_random_model(v3_spec(91), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_scaling, "yarn");
    EXPECT_NEAR(cfg.yarn_log_multiplier, 0.1, 1e-7);
    EXPECT_EQ(cfg.leading_dense_layers, 1);
    EXPECT_EQ(cfg.shared_expert_ffn_dim, 32);
    auto backend = backend::make_backend("reference");
    const BuiltModel m = find_arch_builder("deepseek2")(*file, cfg, *backend);
    const double mscale = 1 + 0.1 * std::log(40.0);
    int attentions = 0, copies = 0, moes = 0;
    for (const Node& n : m.graph.nodes) {
        if (n.kind == OpKind::attention) {
            EXPECT_NEAR(n.attention.scale, mscale * mscale / std::sqrt(24.0), 1e-6);
            ++attentions;
        }
        copies += n.kind == OpKind::copy_columns;
        if (n.kind == OpKind::moe_ffn) {
            ++moes;
            EXPECT_GE(n.layer, 1);
            EXPECT_NE(n.moe.shared_gate_up, nullptr);
            EXPECT_EQ(n.moe.shared_gate, nullptr);  // deepseek2's shared experts are not gated
            EXPECT_EQ(n.moe.routing.scoring, backend::MoeScoring::sigmoid);
            EXPECT_EQ(n.moe.routing.correction_bias.size(), 8u);
            EXPECT_EQ(n.moe.routing.n_groups, 4);
            EXPECT_FLOAT_EQ(n.moe.routing.scale, 2.5f);
        }
    }
    EXPECT_EQ(attentions, 3);
    EXPECT_EQ(copies, 9);
    EXPECT_EQ(moes, 2);
}

// --- load errors -----------------------------------------------------------------------------

// Trailing NextN (multi-token prediction) blocks are stored but not run: a 3-block file with
// nextn_predict_layers 1 gives the logits of the same file cut to 2 blocks.
TEST(Deepseek2Layouts, NextnBlocksAreNotRun) {
    const std::string full = test::temp_path("deepseek2_nextn_full.gguf");
    write_random_model(v3_spec(97), nullptr, full);
    const std::string nextn = test::temp_path("deepseek2_nextn.gguf"), cut = test::temp_path("deepseek2_nextn_cut.gguf");
    rewrite(full, nextn, {.set = {{"deepseek2.nextn_predict_layers", gguf::Value::u32(1)}}});
    rewrite(full, cut, {.set = {{"deepseek2.block_count", gguf::Value::u32(2)}}});
    EXPECT_EQ(read_config(*gguf::File::open(nextn)).n_layers, 2);
    const auto a = reference_logits(nextn, prompt(7)), b = reference_logits(cut, prompt(7)), c = reference_logits(full, prompt(7));
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);  // the third block does change them when run
}

TEST(Deepseek2Errors, NameTheMissingOrContradictoryKeyOrTensor) {
    const std::string full = test::temp_path("deepseek2_errors.gguf");
    write_random_model(v3_spec(93), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    const std::string cut = test::temp_path("deepseek2_errors_cut.gguf");
    for (const std::string key : {"deepseek2.attention.kv_lora_rank", "deepseek2.leading_dense_block_count",
                                  "deepseek2.rope.dimension_count", "deepseek2.attention.value_length"}) {
        without(full, cut, key);
        EXPECT_NE(load_error(cut).find(key), std::string::npos) << key << ": " << load_error(cut);
    }
    for (const std::string tensor : {"blk.0.attn_kv_a_mqa.weight", "blk.1.attn_q_b.weight", "blk.2.attn_kv_a_norm.weight",
                                     "blk.1.ffn_up_shexp.weight"}) {
        without(full, cut, tensor);
        EXPECT_NE(load_error(cut).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(cut);
    }
    without(full, cut, "blk.0.attn_kv_b.weight");
    EXPECT_NE(load_error(cut).find("attn_kv_b.weight is missing (and no attn_k_b / attn_v_b pair)"), std::string::npos)
        << load_error(cut);
    // A value head wider than the key's.
    rewrite(full, cut, {.set = {{"deepseek2.attention.value_length", gguf::Value::u32(32)}}});
    EXPECT_NE(load_error(cut).find("value length 32 exceeds the key length 24"), std::string::npos) << load_error(cut);
    // key_length_mla beside a key_length that is not kv_lora + rope.
    RandomModelSpec s = v3_spec(93);
    s.mla_split = true;
    const std::string split = test::temp_path("deepseek2_errors_split.gguf");
    write_random_model(s, nullptr, split);
    ASSERT_EQ(load_error(split), "");
    rewrite(split, cut, {.set = {{"deepseek2.attention.key_length", gguf::Value::u32(24)}}});
    EXPECT_NE(load_error(cut).find("attention.key_length = 24 contradicts kv_lora_rank 32 + rope.dimension_count 8"),
              std::string::npos) << load_error(cut);
    without(full, cut, "deepseek2.rope.scaling.yarn_log_multiplier");
    EXPECT_NE(load_error(cut).find("deepseek2 YaRN needs deepseek2.rope.scaling.yarn_log_multiplier"), std::string::npos)
        << load_error(cut);
    rewrite(full, cut, {.set = {{"deepseek2.attention.temperature_scale", gguf::Value::f32(0.1f)}}});  // no length
    EXPECT_NE(load_error(cut).find("deepseek2.attention.temperature_scale needs a positive "
                                   "deepseek2.attention.temperature_length, got 0"), std::string::npos) << load_error(cut);
    rewrite(full, cut, {.set = {{"deepseek2.nextn_predict_layers", gguf::Value::u32(3)}}});
    EXPECT_NE(load_error(cut).find("nextn_predict_layers = 3 must be 0..2"), std::string::npos) << load_error(cut);
    rewrite(full, cut, {.set = {{"deepseek2.leading_dense_block_count", gguf::Value::u32(9)}}});
    EXPECT_NE(load_error(cut).find("leading_dense_block_count = 9 must be 0..3"), std::string::npos) << load_error(cut);
}

}  // namespace
}  // namespace pagoda::model
