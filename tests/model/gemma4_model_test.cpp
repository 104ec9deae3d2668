// gemma4 end to end, as gen-model writes it with llama.cpp's names and keys: the reference
// backend's logits against a direct evaluation of Gemma 4's equations written out here from the
// file's tensors (no pagoda graph code: per-head Q/K norms, V's weightless norm, V = K on full layers,
// KV shared by the last layers, sliding windows, "proportional" RoPE through rope_freqs, the layer
// output scale, GELU-gated FFN with sandwich norms, the final soft cap, and the 26B-A4B's experts
// beside the dense FFN); the CPU backend against the reference, fused and unfused, F32 and Q8_0,
// prefill and decode, dense and with experts; and the forms refused by name.
#include <algorithm>
#include <cmath>
#include <functional>
#include <gtest/gtest.h>

#include "backend/cpu/matmul_test_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "direct_equations.h"
#include "model_compare.h"
#include "quant/quantize_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagoda::model {
namespace {

using model_compare::prompt;
using model_compare::reference_logits;

// Six layers: sliding, sliding, full, sliding, sliding, full (window 5); the last two share the KV of
// layers 3 (sliding) and 2 (full); full layers have no attn_v. As the 31B, sliding and full layers
// differ in head size (16 / 32) and KV heads (2 / 1) unless `uniform`.
RandomModelSpec gemma4_spec(uint64_t seed, int64_t shared_kv = 2, bool v_equals_k = true, bool uniform = false,
                            int64_t experts = 0) {
    RandomModelSpec s;
    s.arch = "gemma4";
    s.n_layers = 6; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = uniform ? 32 : 16; s.ffn_dim = 96; s.vocab_size = 300;
    s.full_head_dim = 32; s.full_kv_heads = uniform ? 2 : 1;
    s.sliding_window = 5; s.swa_period = 3; s.shared_kv_layers = shared_kv; s.v_equals_k = v_equals_k;
    s.final_softcap = 30.0f; s.seed = seed;
    s.n_experts = experts; s.n_experts_used = 2; s.expert_ffn_dim = 48;
    return s;
}

// The 26B-A4B's form: every layer runs 6 experts (top 2, 48 wide) beside its dense FFN.
RandomModelSpec gemma4_moe_spec(uint64_t seed) { return gemma4_spec(seed, 2, true, false, 6); }

// --- the equations, evaluated directly from an F32 file ------------------------------------------

struct Direct : direct::Weights {
    // RMS norm of n values; w null: no weight.
    static void norm(double* x, size_t n, const float* w, double eps) {
        double ss = 0;
        for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
        const double inv = 1 / std::sqrt(ss / double(n) + eps);
        for (size_t i = 0; i < n; ++i) x[i] = x[i] * inv * (w ? double(w[i]) : 1.0);
    }
    static std::vector<double> normed(std::vector<double> x, const float* w, double eps) {
        norm(x.data(), x.size(), w, eps);
        return x;
    }
    // NEOX rotation of a head of `dims` values at x: pairs (i, i + dims/2), angle pos * theta^(-2i/dims) / factor_i.
    static void rope(double* x, int64_t dims, int64_t pos, double theta, const float* factors) {
        for (int64_t i = 0; i < dims / 2; ++i) {
            const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(dims)) / (factors ? double(factors[i]) : 1.0);
            const double x0 = x[i], x1 = x[i + dims / 2];
            x[i] = x0 * std::cos(a) - x1 * std::sin(a);
            x[i + dims / 2] = x0 * std::sin(a) + x1 * std::cos(a);
        }
    }
    static double gelu(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }

    // The experts branch of layer p on the residual r: the router reads rms_norm(r) / sqrt(dim) *
    // ffn_gate_inp.scale; softmax over all experts, the top k renormalised; expert e computes
    // down_e(gelu(gate_e h) * up_e h) on h = rms_norm(r, pre_ffw_norm_2), gate|up stored fused (each
    // expert's gate rows, then its up rows), times ffn_down_exps.scale[e]; the sum, then post_ffw_norm_2.
    std::vector<double> experts(const ModelConfig& c, const std::string& p, const std::vector<double>& r) const {
        const int64_t E = c.n_experts, F = c.expert_ffn_dim, D = c.dim;
        auto router_in = normed(r, tensor(p + "ffn_gate_inp.scale"), c.rms_eps);
        for (double& v : router_in) v /= std::sqrt(double(D));
        const auto logit = mul(tensor(p + "ffn_gate_inp.weight"), router_in, E);
        std::vector<double> prob(logit.size());
        const double top = *std::max_element(logit.begin(), logit.end());
        double sum = 0;
        for (size_t e = 0; e < prob.size(); ++e) sum += (prob[e] = std::exp(logit[e] - top));
        for (double& v : prob) v /= sum;
        std::vector<size_t> order(static_cast<size_t>(E));
        for (size_t e = 0; e < order.size(); ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
        order.resize(size_t(c.n_experts_used));
        double picked = 0;
        for (size_t e : order) picked += prob[e];
        const auto h = normed(r, tensor(p + "pre_ffw_norm_2.weight"), c.rms_eps);
        std::vector<double> out(size_t(D), 0.0);
        for (size_t e : order) {
            const float* gu = tensor(p + "ffn_gate_up_exps.weight") + e * size_t(2 * F * D);
            auto g = mul(gu, h, F);
            const auto u = mul(gu, h, F, F);
            for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * u[i];
            const auto y = mul(tensor(p + "ffn_down_exps.weight") + e * size_t(D * F), g, D);
            const double w = prob[e] / picked * double(tensor(p + "ffn_down_exps.scale")[e]);
            for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
        }
        return normed(out, tensor(p + "post_ffw_norm_2.weight"), c.rms_eps);
    }

    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids) const {
        const int64_t H = c.n_heads, T = int64_t(ids.size()), L = c.n_layers;
        const double eps = c.rms_eps;
        const int64_t window = f.get_int("gemma4.attention.sliding_window");
        const auto& pattern = f.find("gemma4.attention.sliding_window_pattern")->as_array()->items;
        const int64_t shared = f.get_int("gemma4.attention.shared_kv_layers");
        const double cap = f.get_float("gemma4.final_logit_softcapping");
        std::vector<bool> sliding;
        for (const auto& v : pattern) sliding.push_back(std::get<bool>(v.data));
        std::vector<std::vector<double>> x(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) {
            const float* e = tensor("token_embd.weight") + size_t(ids[size_t(t)]) * size_t(c.dim);
            for (int64_t i = 0; i < c.dim; ++i) x[size_t(t)].push_back(double(e[i]) * std::sqrt(double(c.dim)));
        }
        std::vector<std::vector<std::vector<double>>> K(static_cast<size_t>(L)), V(static_cast<size_t>(L));  // per layer, per position
        for (int64_t l = 0; l < L; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            const bool swa = sliding[size_t(l)];
            const int64_t hd = f.get_int(swa ? "gemma4.attention.key_length_swa" : "gemma4.attention.key_length");
            const int64_t KV = *f.find("gemma4.attention.head_count_kv")->as_array()->items[size_t(l)].as_int();            const double theta = swa ? f.get_float("gemma4.rope.freq_base_swa") : f.get_float("gemma4.rope.freq_base");
            const float* factors = swa ? nullptr : tensor("rope_freqs.weight");
            int64_t src = l;
            if (l >= L - shared)
                for (int64_t j = 0; j < L - shared; ++j)
                    if (sliding[size_t(j)] == swa) src = j;
            std::vector<std::vector<double>> q(static_cast<size_t>(T));
            for (int64_t s = 0; s < T; ++s) {
                const auto h = normed(x[size_t(s)], tensor(p + "attn_norm.weight"), eps);
                q[size_t(s)] = mul(tensor(p + "attn_q.weight"), h, H * hd);
                for (int64_t hh = 0; hh < H; ++hh) {
                    norm(q[size_t(s)].data() + hh * hd, size_t(hd), tensor(p + "attn_q_norm.weight"), eps);
                    rope(q[size_t(s)].data() + hh * hd, hd, s, theta, factors);
                }
                if (src != l) continue;
                auto k = mul(tensor(p + "attn_k.weight"), h, KV * hd);
                auto v = has(p + "attn_v.weight") ? mul(tensor(p + "attn_v.weight"), h, KV * hd) : k;
                for (int64_t hh = 0; hh < KV; ++hh) {
                    norm(k.data() + hh * hd, size_t(hd), tensor(p + "attn_k_norm.weight"), eps);
                    rope(k.data() + hh * hd, hd, s, theta, factors);
                    norm(v.data() + hh * hd, size_t(hd), nullptr, eps);
                }
                K[size_t(l)].push_back(k);
                V[size_t(l)].push_back(v);
            }
            const auto& k = K[size_t(src)];
            const auto& v = V[size_t(src)];
            for (int64_t s = 0; s < T; ++s) {
                const int64_t first = swa ? std::max<int64_t>(0, s - window + 1) : 0;
                std::vector<double> out = direct::attend(q, k, v, s, H, KV, hd, hd, 1.0, first);  // scale 1: the norms carry it
                const auto o = normed(mul(tensor(p + "attn_output.weight"), out, c.dim), tensor(p + "post_attention_norm.weight"), eps);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] += o[size_t(i)];
                const auto fin = normed(x[size_t(s)], tensor(p + "ffn_norm.weight"), eps);
                auto g = mul(tensor(p + "ffn_gate.weight"), fin, c.ffn_dim);
                const auto u = mul(tensor(p + "ffn_up.weight"), fin, c.ffn_dim);
                for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * u[i];
                auto d = mul(tensor(p + "ffn_down.weight"), g, c.dim);
                if (has(p + "ffn_gate_inp.weight")) {
                    d = normed(d, tensor(p + "post_ffw_norm_1.weight"), eps);
                    const auto m = experts(c, p, x[size_t(s)]);
                    for (size_t i = 0; i < d.size(); ++i) d[i] += m[i];
                }
                const auto y = normed(d, tensor(p + "post_ffw_norm.weight"), eps);
                const double scale = tensor(p + "layer_output_scale.weight")[0];
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(s)][size_t(i)] = (x[size_t(s)][size_t(i)] + y[size_t(i)]) * scale;
            }
        }
        std::vector<double> all;
        for (int64_t s = 0; s < T; ++s) {
            const auto o = mul(tensor("output.weight"), normed(x[size_t(s)], tensor("output_norm.weight"), eps), c.vocab_size);
            for (double v : o) all.push_back(cap * std::tanh(v / cap));
        }
        return all;
    }
};

void expect_direct(const RandomModelSpec& spec, const std::string& name) {
    const std::string path = test::temp_path("gemma4_direct_" + name + ".gguf");
    write_random_model(spec, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    const std::vector<int32_t> ids = prompt(13);
    const auto want = Direct{*file}.logits(cfg, ids);
    const auto got = reference_logits(path, ids);
    ASSERT_GT(direct::largest_abs(want), 0.1);
    direct::expect_logits_near(got, want, 1e-4, name);
}

TEST(Gemma4Direct, ReferenceBackendComputesGemma4sEquations) {
    expect_direct(gemma4_spec(61), "shared_v_eq_k");
    expect_direct(gemma4_spec(62, 0, false), "per_layer_shapes");
    expect_direct(gemma4_spec(63, 2, true, true), "uniform");
    expect_direct(gemma4_moe_spec(64), "experts");
}

TEST(Gemma4Direct, FileLayoutOfTheExperts) {
    // The 26B-A4B's tensors by llama.cpp's names and shapes, and its expert keys read back.
    const std::string path = test::temp_path("gemma4_moe_shapes.gguf");
    write_random_model(gemma4_moe_spec(65), nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.n_experts, 6);
    EXPECT_EQ(cfg.n_experts_used, 2);
    EXPECT_EQ(cfg.expert_ffn_dim, 48);
    EXPECT_EQ(cfg.ffn_dim, 96);  // the dense FFN beside the experts keeps its own width
    EXPECT_TRUE(cfg.expert_weights_norm);
    using Shape = std::vector<int64_t>;
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_up_exps.weight")->shape, (Shape{64, 2 * 48, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_down_exps.weight")->shape, (Shape{48, 64, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_down_exps.scale")->shape, (Shape{6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_inp.weight")->shape, (Shape{64, 6}));
    EXPECT_EQ(file->find_tensor("blk.3.ffn_gate_inp.scale")->shape, (Shape{64}));
    for (const char* norm : {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2", "ffn_norm", "post_ffw_norm"})
        EXPECT_NE(file->find_tensor(std::string("blk.3.") + norm + ".weight"), nullptr) << norm;
}

TEST(Gemma4Direct, FileLayoutOfSharedKvAndVEqualsK) {
    // The sharing layers hold no K/V tensors, full layers with V = K no attn_v, and the per-layer
    // KV-head array reads as one count.
    const std::string path = test::temp_path("gemma4_shapes.gguf");
    write_random_model(gemma4_spec(63), nullptr, path);
    auto file = gguf::File::open(path);
    EXPECT_EQ(file->find_tensor("blk.4.attn_k.weight"), nullptr);
    EXPECT_EQ(file->find_tensor("blk.5.attn_k_norm.weight"), nullptr);
    EXPECT_EQ(file->find_tensor("blk.2.attn_v.weight"), nullptr);   // full layer: V = K
    EXPECT_NE(file->find_tensor("blk.1.attn_v.weight"), nullptr);   // sliding layer: its own V
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.n_kv_heads, 2);  // the largest of the per-layer counts (2 sliding, 1 full)
    EXPECT_EQ(cfg.head_dim, 32);   // the larger head size (16 sliding, 32 full): the paged KV's row
    EXPECT_EQ(file->find_tensor("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{64, 2 * 16}));
    EXPECT_EQ(file->find_tensor("blk.2.attn_k.weight")->shape, (std::vector<int64_t>{64, 1 * 32}));
}

// --- the CPU backend against the reference -------------------------------------------------------

struct Case {
    std::string name;
    std::string quant;
    bool fusion;
    double tolerance;
    int64_t experts = 0, experts_used = 2;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Gemma4Model : public ::testing::TestWithParam<Case> {};

TEST_P(Gemma4Model, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    RandomModelSpec spec = gemma4_spec(71, 2, true, false, c.experts);
    spec.n_experts_used = c.experts_used;
    const std::string path = model_compare::write_model(spec, "gemma4_" + c.name, c.quant);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const KvOptions kvo{.block_size = 4, .dtype = kv::KvDtype::f32};
    auto model = open_step_model(file, {.threads = 2, .kv = kvo, .tokens_wanted = 64, .fusion = c.fusion});
    const std::vector<int32_t> ids = prompt(19);
    const std::vector<float> expected = reference_logits(path, ids);
    model_compare::expect_matches_reference(*model, expected, ids, c.tolerance);
}

// Q8_0: the CPU's int8 path rounds activations to int8 per 32 values; six layers whose sliding
// windows average only five keys pass that on with little averaging: measured worst 6.5e-2 of the
// largest logit on this model's uniform-shape form (4.5e-2 with every window wider than the prompt),
// as reference_model_test's gemma3 Q8_0 case measures 3.5e-2 over fewer layers. With experts, Q8_0
// uses every expert: over 19 tokens x 6 layers of top-2 routing, int8 noise flips a close choice
// somewhere and that position's logits move by far more than any tolerance (routing itself is
// checked at F32 above and against hand-worked weights in moe_router_test).
INSTANTIATE_TEST_SUITE_P(RandomModels, Gemma4Model,
                         ::testing::Values(Case{"f32", "", true, 1e-5}, Case{"f32_unfused", "", false, 1e-5},
                                           Case{"q8_0", "q8_0", true, 8e-2}, Case{"q8_0_unfused", "q8_0", false, 8e-2},
                                           Case{"experts_f32", "", true, 1e-5, 6}, Case{"experts_f32_unfused", "", false, 1e-5, 6},
                                           Case{"experts_q8_0", "q8_0", true, 8e-2, 6, 6}),
                         [](const auto& info) { return info.param.name; });

// gen-model writes its synthetic vocabulary in Gemma 4's tokenizer form: model "gemma4" with merges,
// loaded as such (hand-worked ids: <unk> <s> </s>, bytes 3..258, then "▁e" 259, "e" 260, "▁t" 261, ...).
TEST(Gemma4Model, GenModelWritesTheGemma4TokenizerModel) {
    const std::string path = test::temp_path("gemma4_tokenizer_model.gguf");
    write_random_model(gemma4_spec(91), nullptr, path);
    const auto file = gguf::File::open(path);
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "gemma4");
    EXPECT_EQ(file->get_strings("tokenizer.ggml.merges").front(), "\xE2\x96\x81 e");
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    EXPECT_EQ(tok->vocab().pre(), "gemma4");
    EXPECT_EQ(tok->encode(" eat"), (std::vector<int32_t>{1, 259, 264, 262}));  // <s> ▁e a t, no dummy prefix
    EXPECT_EQ(tok->encode("hat\nzq", {.add_bos = false}), (std::vector<int32_t>{274, 264, 262, 3 + '\n', 3 + 'z', 3 + 'q'}));
    for (std::string_view text : {" the cat\n\nsat  on", "caf\xC3\xA9 \xF0\x9F\x98\x80"})
        EXPECT_EQ(tok->decode(tok->encode(text)), text);
}

// --- the forms refused by name -------------------------------------------------------------------

// Rewrites the gen-model file with one metadata key changed (or a tensor added) and expects the load
// to fail naming `what`.
void expect_refused(const std::function<void(gguf::Writer&)>& edit, const std::string& what, const std::string& name,
                    bool vocabulary = false) {
    const std::string base = test::temp_path("gemma4_refuse_base.gguf");
    write_random_model(gemma4_spec(81, 0, false), nullptr, base);
    auto file = gguf::File::open(base);
    gguf::Writer w;
    for (const auto& [key, value] : file->metadata()) w.set(key, value);
    for (const auto& t : file->tensors())
        w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    edit(w);
    const std::string path = test::temp_path("gemma4_refuse_" + name + ".gguf");
    w.write(path);
    try {
        if (vocabulary) tokenizer::Vocab::from_gguf(*gguf::File::open(path));
        else open_step_model(path, {.backend = "reference", .tokens_wanted = 64});
        FAIL() << name << ": loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

TEST(Gemma4Refused, FormsThePagedKvOrGraphCannotRunAreNamed) {
    expect_refused([](gguf::Writer& w) { w.set("gemma4.attention.value_length_swa", gguf::Value::u32(8)); },
                   "sliding layers' key length 16 differs from their value length 8", "value_length");
    expect_refused([](gguf::Writer& w) {  // 2 and 3 KV heads: the paged KV cannot repeat 2 heads into 3
        std::vector<gguf::Value> kv(6, gguf::Value::u32(2));
        kv[2] = gguf::Value::u32(3);
        w.set("gemma4.attention.head_count_kv", gguf::Value::array(gguf::ValueType::u32, kv));
    }, "mixes 2 and 3 KV heads", "kv_heads");
    expect_refused([](gguf::Writer& w) { w.set("gemma4.embedding_length_per_layer_input", gguf::Value::u32(8)); },
                   "per-layer embeddings", "ple");
    expect_refused([](gguf::Writer& w) { w.set("gemma4.attention.shared_kv_layers", gguf::Value::u32(6)); },
                   "shared_kv_layers", "shared_all");
    expect_refused([](gguf::Writer& w) { w.add_tensor("blk.0.ffn_gate_inp.weight", gguf::GgmlType::F32, {64, 4},
                                                       std::vector<uint8_t>(64 * 4 * 4, 0)); },
                   "blk.0.ffn_gate_inp.weight is present but key gemma4.expert_count is missing", "experts");
    // Gemma 4's own tokenizer model loads (gemma4_tokenizer_test.cpp); a malformed merge is named.
    expect_refused([](gguf::Writer& w) { w.set("tokenizer.ggml.merges", gguf::Value::strings({"ab"})); },
                   "tokenizer.ggml.merges[0] = 'ab' is not of the form 'left right'", "tokenizer", true);
}

}  // namespace
}  // namespace pagoda::model
