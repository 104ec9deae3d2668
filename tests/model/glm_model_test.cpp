// glm4moe (GLM-4.5), glm4 (GLM-4-0414), smollm3 and mistral3 (Ministral 3) end to end, as gen-model writes them with llama.cpp's
// names and keys: the reference backend's logits against a direct evaluation of each architecture's
// equations written out here from the file's tensors (no pagoda graph code: Q/K/V biases, per-head
// Q/K norms, partial RoPE in NEOX or adjacent pairs, glm4's sandwich norms and fused gate|up,
// glm4moe's post_attention_norm before the FFN, smollm3's NoPE layers); the CPU backend against the
// reference, fused and unfused, F32 and Q8_0, prefill and decode; glm4moe's router as configured
// (sigmoid, correction bias, scale, shared experts ungated, leading dense layers); NextN blocks
// stored and not run; mistral3's unscaled YaRN against a llama twin and its position bound; and load
// errors naming the key or tensor.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/rope_frequencies.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

RandomModelSpec glm4moe_spec(uint64_t seed) {
    RandomModelSpec s;
    s.arch = "glm4moe";
    s.n_layers = 3; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 32; s.ffn_dim = 96; s.vocab_size = 300;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.n_shared_experts = 1; s.leading_dense = 1;
    s.expert_weights_scale = 2.5f; s.expert_weights_norm = true; s.qk_norm = true; s.seed = seed;
    return s;
}

RandomModelSpec dense_spec(const std::string& arch, uint64_t seed) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = arch == "smollm3" ? 5 : 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300;
    s.head_dim = arch == "glm4" ? 32 : 0;
    s.seed = seed;
    return s;
}

std::vector<int32_t> prompt(int n) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % 300);
    return ids;
}

std::vector<float> reference_logits(const std::string& path, const std::vector<int32_t>& ids) {
    auto model = open_step_model(path, {.backend = "reference", .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 64});
    SequenceRunner runner(*model, false);
    return runner.prefill(0, ids, 64, true);
}

// --- the equations, evaluated directly from an F32 file ------------------------------------------

struct Direct {
    const gguf::File& f;
    const float* tensor(const std::string& name) const {
        const auto* info = f.find_tensor(name);
        if (!info || info->type != gguf::GgmlType::F32) throw std::runtime_error("no f32 tensor " + name);
        return reinterpret_cast<const float*>(info->data);
    }
    bool has(const std::string& name) const { return f.find_tensor(name) != nullptr; }
    // y = W x (+ b), W stored [cols, rows]; `first` skips that many rows.
    static std::vector<double> mul(const float* w, const std::vector<double>& x, int64_t rows, int64_t first = 0) {
        std::vector<double> y(size_t(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (size_t c = 0; c < x.size(); ++c) y[size_t(r)] += double(w[size_t(r + first) * x.size() + c]) * x[c];
        return y;
    }
    static void add(std::vector<double>& y, const float* b) {
        for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    }
    static std::vector<double> norm(const double* x, size_t n, const float* w, double eps) {
        double ss = 0;
        for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
        const double inv = 1 / std::sqrt(ss / double(n) + eps);
        std::vector<double> y(n);
        for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
        return y;
    }
    static std::vector<double> norm(const std::vector<double>& x, const float* w, double eps) { return norm(x.data(), x.size(), w, eps); }
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
    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids) const {
        const int64_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, r = c.rope_dims, T = int64_t(ids.size());
        const bool neox = c.arch == "glm4moe", glm4 = c.arch == "glm4";
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) {
            const float* e = tensor("token_embd.weight") + size_t(ids[size_t(t)]) * size_t(c.dim);
            x[size_t(t)].assign(e, e + c.dim);
        }
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            const bool use_rope = c.arch != "smollm3" || (l + 1) % 4 != 0;
            std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
            for (int64_t s = 0; s < T; ++s) {
                const auto h = norm(x[size_t(s)], tensor(p + "attn_norm.weight"), eps);
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
                            const auto n = norm(vec->data() + hh * hd, size_t(hd), tensor(p + w + ".weight"), eps);
                            std::copy(n.begin(), n.end(), vec->begin() + hh * hd);
                        }
                        if (use_rope) rope(*vec, size_t(hh * hd), r, s, c.rope_theta, neox);
                    }
            }
            for (int64_t s = 0; s < T; ++s) {
                std::vector<double> out(size_t(H * hd), 0.0);
                for (int64_t hh = 0; hh < H; ++hh) {
                    const int64_t kh = hh / (H / KV);
                    std::vector<double> score(size_t(s + 1));
                    double top = -1e300, sum = 0;
                    for (int64_t j = 0; j <= s; ++j) {
                        double d = 0;
                        for (int64_t i = 0; i < hd; ++i) d += q[size_t(s)][size_t(hh * hd + i)] * k[size_t(j)][size_t(kh * hd + i)];
                        score[size_t(j)] = d / std::sqrt(double(hd));
                        top = std::max(top, score[size_t(j)]);
                    }
                    for (double& e : score) sum += (e = std::exp(e - top));
                    for (int64_t j = 0; j <= s; ++j)
                        for (int64_t i = 0; i < hd; ++i)
                            out[size_t(hh * hd + i)] += score[size_t(j)] / sum * v[size_t(j)][size_t(kh * hd + i)];
                }
                auto o = mul(tensor(p + "attn_output.weight"), out, c.dim);
                if (glm4) o = norm(o, tensor(p + "post_attention_norm.weight"), eps);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
                const auto fin = norm(x[size_t(s)], tensor(p + (neox ? "post_attention_norm" : "ffn_norm") + ".weight"), eps);
                std::vector<double> y;
                if (glm4) {  // ffn_up = [gate rows; up rows]
                    const float* up = tensor(p + "ffn_up.weight");
                    y = mul(tensor(p + "ffn_down.weight"), swiglu(mul(up, fin, c.ffn_dim), mul(up, fin, c.ffn_dim, c.ffn_dim)), c.dim);
                    y = norm(y, tensor(p + "post_ffw_norm.weight"), eps);
                } else {
                    y = mul(tensor(p + "ffn_down.weight"),
                            swiglu(mul(tensor(p + "ffn_gate.weight"), fin, c.ffn_dim), mul(tensor(p + "ffn_up.weight"), fin, c.ffn_dim)),
                            c.dim);
                }
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += y[size_t(i)];
            }
        }
        std::vector<double> all;
        for (int64_t s = 0; s < T; ++s) {
            const auto o = mul(tensor("output.weight"), norm(x[size_t(s)], tensor("output_norm.weight"), eps), c.vocab_size);
            all.insert(all.end(), o.begin(), o.end());
        }
        return all;
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
    ASSERT_EQ(got.size(), want.size());
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * scale) << name << " logit " << i;
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
    const std::string f = test::temp_path("glm_" + c.name + ".gguf");
    write_random_model(spec, nullptr, f);
    if (c.quant.empty()) return f;
    const std::string q = test::temp_path("glm_" + c.name + "_q.gguf");
    ThreadPool pool(2);
    quant::quantize_model({.input = f, .output = q, .target = c.quant}, pool);
    return q;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GlmModel : public ::testing::TestWithParam<Case> {};

TEST_P(GlmModel, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const std::string path = model_path(c);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.arch, c.arch);
    EXPECT_EQ(cfg.rope_style, c.arch == "glm4moe" ? RopeStyle::neox : RopeStyle::normal);
    if (c.arch == "glm4" || c.arch == "glm4moe") {
        EXPECT_EQ(cfg.rope_dims, 16);  // half of the 32-wide heads
    }
    EXPECT_EQ(cfg.rope_scaling, c.arch == "mistral3" ? "yarn" : "none");
    const KvOptions kvo{.block_size = 4, .dtype = kv::KvDtype::f32};
    auto model = open_step_model(file, {.threads = 2, .kv = kvo, .tokens_wanted = 64, .fusion = c.fusion});
    const int64_t vocab = model->info().vocab_size;
    const std::vector<int32_t> ids = prompt(19);
    const std::vector<float> expected = reference_logits(path, ids);
    auto check = [&](const float* row, size_t pos) {
        const float* want = expected.data() + pos * size_t(vocab);
        double scale = 0;
        for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, double(std::abs(want[i])));
        for (int64_t i = 0; i < vocab; ++i)
            ASSERT_NEAR(row[i], want[i], c.tolerance * scale) << "position " << pos << " logit " << i;
    };
    SequenceRunner runner(*model, false);
    auto logits = runner.prefill(0, ids, 64, true);
    for (size_t p = 0; p < ids.size(); ++p) check(logits.data() + p * size_t(vocab), p);
    logits = runner.prefill(1, std::span<const int32_t>(ids.data(), 7));
    check(logits.data(), 6);
    for (size_t p = 7; p < ids.size(); ++p) {
        logits = runner.decode(1, ids[p]);
        check(logits.data(), p);
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

// --- the graphs --------------------------------------------------------------------------------

// glm4moe: MoE after the dense first layer with the sigmoid router, its correction bias, the routed
// scale and renormalisation, an ungated shared expert; a rope per Q and K of every layer.
TEST(GlmGraph, Glm4moeRouterAndLayout) {
    const std::string path = test::temp_path("glm_graph.gguf");
    write_random_model(glm4moe_spec(91), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.leading_dense_layers, 1);
    EXPECT_EQ(cfg.n_shared_experts, 1);
    EXPECT_EQ(cfg.shared_expert_ffn_dim, 32);
    EXPECT_EQ(cfg.expert_gating, 2);
    EXPECT_TRUE(cfg.expert_weights_norm);
    EXPECT_NE(cfg.describe().find("1 leading dense, 1 shared experts"), std::string::npos) << cfg.describe();
    auto backend = backend::make_backend("reference");
    const BuiltModel m = find_arch_builder("glm4moe")(*file, cfg, *backend);
    int moes = 0, ropes = 0, head_norms = 0;
    for (const Node& n : m.graph.nodes) {
        ropes += n.kind == OpKind::rope;
        head_norms += n.kind == OpKind::rms_norm && n.n_heads > 0;
        if (n.kind != OpKind::moe_ffn) continue;
        ++moes;
        EXPECT_GE(n.layer, 1);
        EXPECT_NE(n.moe.shared_gate_up, nullptr);
        EXPECT_EQ(n.moe.shared_gate, nullptr);  // glm4moe's shared expert is not gated
        EXPECT_EQ(n.moe.routing.scoring, backend::MoeScoring::sigmoid);
        EXPECT_EQ(n.moe.routing.correction_bias.size(), 8u);
        EXPECT_FLOAT_EQ(n.moe.routing.scale, 2.5f);
        EXPECT_TRUE(n.moe.normalize);
        EXPECT_EQ(n.moe.n_used, 2);
    }
    EXPECT_EQ(moes, 2);
    EXPECT_EQ(ropes, 6);
    EXPECT_EQ(head_norms, 6);
}

// smollm3: layers 3 and 7 of 8 (every 4th) have no rope op; a file of 3 layers (none of them NoPE)
// gives the logits of the same file labelled llama, and a 4th layer makes them differ.
TEST(GlmGraph, Smollm3SkipsRopeOnEveryFourthLayer) {
    RandomModelSpec s = dense_spec("smollm3", 93);
    s.n_layers = 8;
    const std::string path = test::temp_path("glm_smollm3_8.gguf");
    write_random_model(s, nullptr, path);
    auto file = gguf::File::open(path);
    auto backend = backend::make_backend("reference");
    const BuiltModel m = find_arch_builder("smollm3")(*file, read_config(*file), *backend);
    std::vector<int32_t> rope_layers;
    int32_t layer = -1;
    for (const Node& n : m.graph.nodes) {
        if (n.layer >= 0) layer = n.layer;
        if (n.kind == OpKind::rope && (rope_layers.empty() || rope_layers.back() != layer)) rope_layers.push_back(layer);
    }
    EXPECT_EQ(rope_layers, (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
    for (const int64_t layers : {3, 4}) {
        s.n_layers = layers;
        std::vector<std::vector<float>> logits;
        for (const std::string arch : {"smollm3", "llama"}) {
            s.arch = arch;
            const std::string p = test::temp_path("glm_smollm3_vs_" + arch + ".gguf");
            write_random_model(s, nullptr, p);
            logits.push_back(reference_logits(p, prompt(9)));
        }
        if (layers == 3) {
            EXPECT_EQ(logits[0], logits[1]);
        } else {
            EXPECT_NE(logits[0], logits[1]);
        }
    }
}

// mistral3: YaRN frequencies with the rotation unscaled — the logits of the same weights as a llama
// file whose rope_freqs.weight holds YaRN's per-frequency divisors (an independent route to the same
// rotation); the attention temperature scaling bounds the positions run (original context - 1), a
// longer --ctx is refused naming it, and a yarn_log_multiplier other than 0 or 1 is refused.
TEST(GlmGraph, Mistral3YarnUnscaledAndTemperatureBound) {
    RandomModelSpec s = dense_spec("mistral3", 95);
    s.context_length = 256;  // original context 64: 63 positions run
    const std::string path = test::temp_path("glm_mistral3.gguf");
    write_random_model(s, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    {
        auto model = open_step_model(path, {.backend = "reference", .tokens_wanted = 64});
        EXPECT_EQ(model->info().max_context, 63);
    }
    std::string error;
    try {
        open_step_model(path, {.backend = "reference", .tokens_wanted = 64, .max_context = 100});
    } catch (const Error& e) {
        error = e.what();
    }
    EXPECT_NE(error.find("--ctx 100 exceeds the model's 63 positions before its attention temperature scaling "
                         "(mistral3.attention.temperature_scale = 0.1"), std::string::npos) << error;
    // The llama twin: the same tensors plus rope_freqs.weight = theta_i / yarn_theta_i, keys as llama.
    const YarnRopeScaling yarn = read_yarn_rope_scaling(*file, "mistral3", cfg.context_length, true);
    const backend::RopeSpec spec = yarn_rope_spec(cfg.rope_dims, false, cfg.rope_theta, yarn);
    const backend::RopeSpec plain = make_rope_spec(cfg.rope_dims, false, cfg.rope_theta, 1.0, {});
    std::vector<float> divisors;
    for (size_t i = 0; i < spec.inv_freq.size(); ++i) divisors.push_back(float(plain.inv_freq[i] / spec.inv_freq[i]));
    EXPECT_GT(divisors.back(), 2.0f);  // YaRN does interpolate the low frequencies here
    gguf::Writer w;
    for (const auto& [key, value] : file->metadata()) {
        if (key.rfind("mistral3.", 0) == 0) {
            if (key.find("rope.scaling") == std::string::npos && key.find("temperature") == std::string::npos)
                w.set("llama." + key.substr(9), value);
        } else {
            w.set(key, key == "general.architecture" ? gguf::Value::string("llama") : value);
        }
    }
    for (const auto& t : file->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    std::vector<uint8_t> bytes(divisors.size() * 4);
    std::memcpy(bytes.data(), divisors.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", gguf::GgmlType::F32, {int64_t(divisors.size())}, std::move(bytes));
    const std::string twin = test::temp_path("glm_mistral3_llama_twin.gguf");
    w.write(twin);
    const auto a = reference_logits(path, prompt(13)), b = reference_logits(twin, prompt(13));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << i;
}

// --- NextN blocks and load errors --------------------------------------------------------------

// A copy of `from` without the key or tensor `drop` (and tensors starting with `drop_prefix`), with
// `set` keys replaced.
void rewrite(const std::string& from, const std::string& to, const std::string& drop,
             const std::vector<std::pair<std::string, gguf::Value>>& set = {}, const std::string& drop_prefix = "") {
    auto in = gguf::File::open(from);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata())
        if (key != drop) w.set(key, value);
    for (const auto& [key, value] : set) w.set(key, value);
    for (const auto& t : in->tensors())
        if (t.name != drop && (drop_prefix.empty() || t.name.rfind(drop_prefix, 0) != 0))
            w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    w.write(to);
}

std::string load_error(const std::string& path) {
    try {
        open_step_model(path, {.threads = 1, .tokens_wanted = 8});
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// The converter's NextN block (block_count counts it, with its eh_proj / enorm / hnorm tensors) is
// stored and not run: the logits of the file without it.
TEST(GlmLayouts, NextnBlocksAreNotRun) {
    RandomModelSpec s = glm4moe_spec(97);
    s.nextn_layers = 1;
    const std::string nextn = test::temp_path("glm_nextn.gguf"), cut = test::temp_path("glm_nextn_cut.gguf");
    write_random_model(s, nullptr, nextn);
    auto file = gguf::File::open(nextn);
    EXPECT_EQ(file->get_int("glm4moe.block_count"), 4);
    EXPECT_NE(file->find_tensor("blk.3.nextn.eh_proj.weight"), nullptr);
    EXPECT_EQ(read_config(*file).n_layers, 3);
    rewrite(nextn, cut, "glm4moe.nextn_predict_layers", {{"glm4moe.block_count", gguf::Value::u32(3)}}, "blk.3.");
    EXPECT_EQ(reference_logits(nextn, prompt(7)), reference_logits(cut, prompt(7)));
}

TEST(GlmErrors, NameTheMissingOrInconsistentKeyOrTensor) {
    const std::string full = test::temp_path("glm_errors.gguf"), cut = test::temp_path("glm_errors_cut.gguf");
    write_random_model(glm4moe_spec(93), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    for (const std::string key : {"glm4moe.expert_count", "glm4moe.expert_used_count", "glm4moe.block_count"}) {
        rewrite(full, cut, key);
        EXPECT_NE(load_error(cut).find(key), std::string::npos) << key << ": " << load_error(cut);
    }
    for (const std::string tensor : {"blk.0.post_attention_norm.weight", "blk.1.ffn_up_shexp.weight", "blk.2.ffn_gate_inp.weight",
                                     "blk.0.ffn_gate.weight", "blk.1.attn_k_norm.weight", "blk.2.attn_v.bias"}) {
        rewrite(full, cut, tensor);
        EXPECT_NE(load_error(cut).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(cut);
    }
    rewrite(full, cut, "", {{"glm4moe.nextn_predict_layers", gguf::Value::u32(3)}});
    EXPECT_NE(load_error(cut).find("nextn_predict_layers = 3 must be 0..2"), std::string::npos) << load_error(cut);
    rewrite(full, cut, "", {{"glm4moe.leading_dense_block_count", gguf::Value::u32(9)}});
    EXPECT_NE(load_error(cut).find("leading_dense_block_count = 9 must be 0..3"), std::string::npos) << load_error(cut);
    rewrite(full, cut, "", {{"glm4moe.rope.dimension_count", gguf::Value::u32(48)}});
    EXPECT_NE(load_error(cut).find("RoPE dimension count 48 must be even and at most the head size 32"), std::string::npos)
        << load_error(cut);

    const std::string mistral = test::temp_path("glm_errors_mistral3.gguf");
    write_random_model(dense_spec("mistral3", 96), nullptr, mistral);
    ASSERT_EQ(load_error(mistral), "");
    rewrite(mistral, cut, "", {{"mistral3.rope.scaling.yarn_log_multiplier", gguf::Value::f32(0.5f)}});
    EXPECT_NE(load_error(cut).find("mistral3.rope.scaling.yarn_log_multiplier = 0.5 is not supported"), std::string::npos)
        << load_error(cut);

    const std::string dense = test::temp_path("glm_errors_glm4.gguf");
    write_random_model(dense_spec("glm4", 94), nullptr, dense);
    ASSERT_EQ(load_error(dense), "");
    for (const std::string tensor : {"blk.0.post_ffw_norm.weight", "blk.1.post_attention_norm.weight", "blk.0.ffn_up.weight"}) {
        rewrite(dense, cut, tensor);
        EXPECT_NE(load_error(cut).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(cut);
    }
}

}  // namespace
}  // namespace pagoda::model
