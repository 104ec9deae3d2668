// qwen3next (Qwen3-Next: qwen35moe's hybrid with fused DeltaNet projections and value heads grouped per
// key head) end to end, as gen-model writes it with llama.cpp's names and keys: the reference backend's
// logits against a direct evaluation written out here from older converters' fused ssm_in (per key head
// g: q_g, k_g, its group's v rows, their z rows) and ssm_ba (per key head: its group's beta rows, then
// their alpha rows), value head g * group + j reading key head g, and the routed experts plus the
// sigmoid-gated shared expert; a wrong interleave or head order fails it. The fused ssm_in and the split
// attn_qkv + attn_gate forms of one model give bitwise the same logits; the CPU against the reference
// at F32 and Q8_0 (to f32 rounding with the weights dequantised; with int8 activations within 2 %, save
// where a DeltaNet head's norm amplifies the rounding); chunked prefill == token by token (bitwise by
// default, to float rounding under PAGODA_DELTA_RULE=chunked).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "backend/cpu/ops/recurrent.h"
#include "backend/cpu/matmul_test_util.h"
#include "hybrid_direct.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "model_compare.h"

namespace pagoda::model {
namespace {

using model_compare::prompt;
using model_compare::reference_logits;
using direct::sigmoid;
using direct::silu;

// 4 value heads over 2 key heads (2 a group): grouped and tiled orders differ.
RandomModelSpec next_spec(uint64_t seed, bool fused) {
    RandomModelSpec s;
    s.arch = "qwen3next";
    s.n_layers = 4; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 96; s.vocab_size = 300;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.shared_expert_ffn_dim = 48;
    s.fused_qkvz = fused;
    s.seed = seed;
    return s;
}

std::string write(const RandomModelSpec& spec, const std::string& name, const std::string& quant = "") {
    return model_compare::write_model(spec, "qwen3next_" + name, quant);
}

struct Direct : direct::Weights {
    int64_t key(const std::string& k) const { return f.get_int("qwen3next." + k); }

    // SwiGLU of one expert (`e` of the stacked [dim, f, E] tensors, or the shared one with e = 0).
    std::vector<double> swiglu(const std::string& gate, const std::string& up, const std::string& down, int64_t e,
                               const std::vector<double>& x, int64_t f) const {
        const size_t dim = x.size();
        auto g = mul(tensor(gate) + size_t(e) * dim * size_t(f), x, f);
        const auto u = mul(tensor(up) + size_t(e) * dim * size_t(f), x, f);
        for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
        return mul(tensor(down) + size_t(e) * dim * size_t(f), g, int64_t(dim));
    }

    // Softmax router, top-k renormalised, plus sigmoid(x . ffn_gate_inp_shexp) x the shared expert.
    std::vector<double> moe(const std::string& p, const ModelConfig& c, const std::vector<double>& x) const {
        const auto logits = mul(tensor(p + "ffn_gate_inp.weight"), x, c.n_experts);
        std::vector<int64_t> order(size_t(c.n_experts));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
        double sum = 0;
        for (int64_t i = 0; i < c.n_experts_used; ++i) sum += std::exp(logits[size_t(order[size_t(i)])]);
        std::vector<double> y(x.size(), 0.0);
        for (int64_t i = 0; i < c.n_experts_used; ++i) {
            const int64_t e = order[size_t(i)];
            const double w = std::exp(logits[size_t(e)]) / sum;  // softmax's shared denominator cancels
            const auto o = swiglu(p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight", p + "ffn_down_exps.weight", e, x,
                                  c.expert_ffn_dim);
            for (size_t j = 0; j < y.size(); ++j) y[j] += w * o[j];
        }
        double gate = 0;
        for (size_t j = 0; j < x.size(); ++j) gate += double(tensor(p + "ffn_gate_inp_shexp.weight")[j]) * x[j];
        const auto s = swiglu(p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight", p + "ffn_down_shexp.weight", 0, x,
                              c.shared_expert_ffn_dim);
        for (size_t j = 0; j < y.size(); ++j) y[j] += sigmoid(gate) * s[j];
        return y;
    }

    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids) const {
        const int64_t T = int64_t(ids.size());
        const int64_t K = key("ssm.conv_kernel"), nk = key("ssm.group_count"), nv = key("ssm.time_step_rank");
        const int64_t dh = key("ssm.state_size"), r = nv / nk, kd = nk * dh, vd = nv * dh, cd = 2 * kd + vd;
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x = embed(ids, c.dim);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            std::vector<std::vector<double>> h(static_cast<size_t>(T)), mixed(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) h[size_t(t)] = rms_norm(x[size_t(t)], tensor(p + "attn_norm.weight"), eps);
            if ((l + 1) % 4 != 0) {  // gated DeltaNet, projections from the fused tensors
                const int64_t G = 2 * dh + 2 * r * dh;  // ssm_in rows of one key head
                std::vector<std::vector<double>> in(static_cast<size_t>(T)), z(static_cast<size_t>(T));
                std::vector<std::vector<double>> alpha(static_cast<size_t>(T)), beta(static_cast<size_t>(T));
                for (int64_t t = 0; t < T; ++t) {
                    const auto qkvz = mul(tensor(p + "ssm_in.weight"), h[size_t(t)], nk * G);
                    const auto ba = mul(tensor(p + "ssm_ba.weight"), h[size_t(t)], 2 * nv);
                    auto& row = in[size_t(t)];
                    row.assign(size_t(cd), 0.0);
                    z[size_t(t)].assign(size_t(vd), 0.0);
                    alpha[size_t(t)].assign(size_t(nv), 0.0);
                    beta[size_t(t)].assign(size_t(nv), 0.0);
                    for (int64_t g = 0; g < nk; ++g) {
                        for (int64_t i = 0; i < dh; ++i) {
                            row[size_t(g * dh + i)] = qkvz[size_t(g * G + i)];
                            row[size_t(kd + g * dh + i)] = qkvz[size_t(g * G + dh + i)];
                        }
                        for (int64_t i = 0; i < r * dh; ++i) {
                            row[size_t(2 * kd + g * r * dh + i)] = qkvz[size_t(g * G + 2 * dh + i)];
                            z[size_t(t)][size_t(g * r * dh + i)] = qkvz[size_t(g * G + 2 * dh + r * dh + i)];
                        }
                        for (int64_t j = 0; j < r; ++j) {
                            beta[size_t(t)][size_t(g * r + j)] = ba[size_t(g * 2 * r + j)];
                            alpha[size_t(t)][size_t(g * r + j)] = ba[size_t(g * 2 * r + r + j)];
                        }
                    }
                }
                const float* w = tensor(p + "ssm_conv1d.weight");
                std::vector<double> S(size_t(nv * dh * dh), 0.0);
                for (int64_t t = 0; t < T; ++t) {
                    const std::vector<double> conv = direct::conv_silu(w, in, t, K, cd);
                    std::vector<double> o(static_cast<size_t>(vd));
                    for (int64_t hv = 0; hv < nv; ++hv) {
                        const int64_t kh = hv / r;  // value heads grouped per key head
                        direct::delta_rule_head(S.data() + hv * dh * dh, {conv.begin() + kh * dh, conv.begin() + (kh + 1) * dh},
                                                {conv.begin() + kd + kh * dh, conv.begin() + kd + (kh + 1) * dh},
                                                conv.data() + 2 * kd + hv * dh, z[size_t(t)].data() + hv * dh,
                                                alpha[size_t(t)][size_t(hv)] + tensor(p + "ssm_dt.bias")[hv],
                                                tensor(p + "ssm_a")[hv], beta[size_t(t)][size_t(hv)],
                                                tensor(p + "ssm_norm.weight"), eps, dh, o.data() + hv * dh);
                    }
                    mixed[size_t(t)] = mul(tensor(p + "ssm_out.weight"), o, c.dim);
                }
            } else {  // gated full attention, as qwen35's
                mixed = direct::gated_attention(*this, p, h, c, eps);
            }
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(t)][size_t(i)] += mixed[size_t(t)][size_t(i)];
                const auto y = moe(p, c, rms_norm(x[size_t(t)], tensor(p + "post_attention_norm.weight"), eps));
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(t)][size_t(i)] += y[size_t(i)];
            }
        }
        return output_logits(x, eps, c.vocab_size);
    }
};

TEST(Qwen3NextDirect, ReferenceBackendComputesTheFusedProjectionsEquations) {
    RandomModelSpec spec = next_spec(83, true);
    spec.n_layers = 8;  // DeltaNet layers 0-2 and 4-6, full attention layers 3 and 7
    const std::string path = write(spec, "direct");
    auto file = gguf::File::open(path);
    ASSERT_NE(file->find_tensor("blk.0.ssm_in.weight"), nullptr);
    ASSERT_EQ(file->find_tensor("blk.0.attn_qkv.weight"), nullptr);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.rope_dims, 4);  // a quarter of the 16-wide heads
    EXPECT_EQ(cfg.shared_expert_ffn_dim, 48);
    const std::vector<int32_t> ids = prompt(11);
    const auto want = Direct{*file}.logits(cfg, ids);
    const auto got = reference_logits(path, ids);
    ASSERT_GT(direct::largest_abs(want), 0.1);
    direct::expect_logits_near(got, want, 1e-4, "qwen3next");
}

// The split form (attn_qkv + attn_gate, today's converter) and the fused ssm_in of the same weights are
// one model: the regrouped rows are the split ones, so every backend's logits agree bitwise.
TEST(Qwen3NextLayout, FusedAndSplitProjectionsGiveBitwiseTheSameLogits) {
    const std::string fused = write(next_spec(85, true), "fused"), split = write(next_spec(85, false), "split");
    {
        auto f = gguf::File::open(split);
        ASSERT_NE(f->find_tensor("blk.0.attn_qkv.weight"), nullptr);
        ASSERT_NE(f->find_tensor("blk.0.attn_gate.weight"), nullptr);
        ASSERT_EQ(f->find_tensor("blk.0.ssm_in.weight"), nullptr);
    }
    const std::vector<int32_t> ids = prompt(9);
    EXPECT_EQ(reference_logits(fused, ids), reference_logits(split, ids));
    auto run = [&](const std::string& path) {
        auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                            .tokens_wanted = 64, .state_slots = 2});
        SequenceRunner runner(*model, false);
        return runner.prefill(0, ids, 64, true);
    };
    EXPECT_EQ(run(fused), run(split));
}

struct Case {
    std::string name, quant;
    bool fused;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class Qwen3NextModel : public ::testing::TestWithParam<Case> {};

// F32, and Q8_0 with the CPU's matmuls dequantising the weights to f32 (dequant_fma): the reference
// reads the same weights, so the two agree to f32 rounding; a layout error is far larger.
TEST_P(Qwen3NextModel, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    backend::cpu::set_quant_method(backend::cpu::QuantMethod::dequant_fma);
    const std::string path = write(next_spec(93, c.fused), c.name, c.quant);
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
    EXPECT_EQ(model->info().n_state_slots, 16);
    EXPECT_EQ(model->info().kv_layout.n_layers, 1);  // only layer 3 attends
    const std::vector<int32_t> ids = prompt(19);
    model_compare::expect_matches_reference(*model, reference_logits(path, ids), ids, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Qwen3NextModel,
                         ::testing::Values(Case{"split_f32", "", false}, Case{"split_q8_0", "q8_0", false},
                                           Case{"fused_f32", "", true}, Case{"fused_q8_0", "q8_0", true}),
                         [](const auto& info) { return info.param.name; });

// Per position of `ids`, whether one of the DeltaNet layers' per-head RMS norms turned int8-sized noise
// into a large error: the layer's input (its projections' input) agrees with the reference's to int8
// noise, under 2 % of its largest value, while its output projection's input (silu(z) x the normed
// heads) parts from the reference's by over 10 %. A value head whose delta-rule output nearly cancels
// (q almost orthogonal to what the state holds) is normed up to the others' size, its int8 noise with it.
std::vector<bool> norm_amplified_positions(const std::string& path, const std::vector<int32_t>& ids) {
    struct Seen {
        std::vector<float> in, out;  // per DeltaNet layer: attention (mixer input), attention_output
    };
    auto observe = [&](const std::string& backend_name) {
        auto model = open_step_model(path, {.backend = backend_name, .threads = 2,
                                            .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
        std::vector<Seen> seen(4);
        model->set_activation_observer([&](int64_t layer, MatmulInput role, const float* x, int64_t n, int64_t cols) {
            EXPECT_EQ(n, int64_t(ids.size()));  // one step: the whole prompt
            if (layer < 0 || layer >= 4 || (layer + 1) % 4 == 0) return;  // the output head, full attention
            if (role == MatmulInput::attention) seen[size_t(layer)].in.assign(x, x + n * cols);
            if (role == MatmulInput::attention_output) seen[size_t(layer)].out.assign(x, x + n * cols);
        });
        SequenceRunner runner(*model, false);
        runner.prefill(0, ids, 64, true);
        return seen;
    };
    const auto cpu = observe("cpu"), ref = observe("reference");
    auto part = [&](const std::vector<float>& a, const std::vector<float>& b, size_t t) {  // relative to b's largest
        const size_t cols = b.size() / ids.size();
        double d = 0, scale = 0;
        for (size_t i = t * cols; i < (t + 1) * cols; ++i)
            d = std::max(d, double(std::abs(a[i] - b[i]))), scale = std::max(scale, double(std::abs(b[i])));
        return d / scale;
    };
    std::vector<bool> amplified(ids.size(), false);
    for (size_t l = 0; l < 4; ++l) {
        if ((l + 1) % 4 == 0) continue;
        EXPECT_FALSE(ref[l].in.empty() || ref[l].out.empty() || cpu[l].out.size() != ref[l].out.size()) << "layer " << l;
        if (ref[l].in.empty() || ref[l].out.empty() || cpu[l].out.size() != ref[l].out.size()) continue;
        for (size_t t = 0; t < ids.size(); ++t)
            if (part(cpu[l].in, ref[l].in, t) < 0.02 && part(cpu[l].out, ref[l].out, t) > 0.1) amplified[t] = true;
    }
    return amplified;
}

// Q8_0 with the CPU's int8 path: each matmul's input is rounded to int8 per 32 values (the reference
// reads it in double), about 0.4 % of a row's largest value. Through four layers of routed experts and
// DeltaNet states that stays under 2 % of the largest logit, except at positions where a DeltaNet value
// head's output nearly cancels and its per-head RMS norm scales the noise up with it: on this model
// positions 0, 1 and 14 (at 14, layer 1's value heads 2 and 3 come out at 1/30 of heads 0 and 1,
// and the logits part by 3.7 %). No routing near-tie is involved: each backend's router input picks
// the same two experts at every position of every layer; and with the weights dequantised (above)
// the whole gap is f32 rounding, so the int8 rounding of the activations is all that remains.
TEST(Qwen3NextInt8, LogitsWithinTwoPercentWhereNoDeltaNetNormAmplifiesTheRounding) {
    for (bool fused : {false, true}) {
        SCOPED_TRACE(fused ? "fused" : "split");
        backend::cpu::testing::KernelConfigGuard guard;
        backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
        backend::cpu::set_quant_method(backend::cpu::QuantMethod::int8_dot);
        const std::string path = write(next_spec(93, fused), fused ? "int8_fused" : "int8_split", "q8_0");
        const std::vector<int32_t> ids = prompt(19);
        const std::vector<bool> amplified = norm_amplified_positions(path, ids);
        EXPECT_TRUE(amplified[14]);  // the 3.7 % position
        EXPECT_LE(std::count(amplified.begin(), amplified.end(), true), 3);
        auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
        model_compare::expect_matches_reference(*model, reference_logits(path, ids), ids,
                                                [&](size_t pos) { return amplified[pos] ? 5e-2 : 2e-2; });
    }
}

// With PAGODA_DELTA_RULE=chunked the CPU runs a slot's tokens of one step in the chunked form of the
// delta rule (its recurrence when the slot has one token): how a prompt is split into steps changes
// its logits only by float rounding, 1e-5 of each position's largest logit (77 tokens: steps of
// 64 + 13 cross a chunk). The default, token by token, keeps them bitwise (the engine tests).
TEST(Qwen3NextState, ChunkedPrefillAgreesWithTokenByToken) {
    struct Chunked {
        backend::cpu::DeltaRuleForm was = backend::cpu::delta_rule_form();
        Chunked() { backend::cpu::set_delta_rule_form(backend::cpu::DeltaRuleForm::chunked); }
        ~Chunked() { backend::cpu::set_delta_rule_form(was); }
    } chunked;
    const std::string path = write(next_spec(101, false), "chunks");
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32},
                                        .tokens_wanted = 256, .state_slots = 4});
    const std::vector<int32_t> ids = prompt(77);
    SequenceRunner runner(*model, false);
    const auto whole = runner.prefill(0, ids, 64, true);
    const size_t vocab = size_t(model->info().vocab_size);
    for (int64_t chunk : {1, 3, 33}) {
        SequenceRunner other(*model, false);
        const auto got = other.prefill(1, ids, chunk, true);
        ASSERT_EQ(got.size(), whole.size());
        for (size_t pos = 0; pos < ids.size(); ++pos) {
            double scale = 0;
            for (size_t i = pos * vocab; i < (pos + 1) * vocab; ++i) scale = std::max(scale, double(std::abs(whole[i])));
            for (size_t i = pos * vocab; i < (pos + 1) * vocab; ++i)
                ASSERT_NEAR(got[i], whole[i], 1e-5 * scale) << "chunk " << chunk << " position " << pos;
        }
    }
}

TEST(Qwen3NextModelErrors, AFileWithoutFusedBetaAlphaIsRefusedByName) {
    RandomModelSpec spec = next_spec(107, false);
    const std::string path = write(spec, "errors");
    auto file = gguf::File::open(path);
    // A file missing ssm_ba: the error names the tensor.
    gguf::Writer w;
    for (const auto& [k, v] : file->metadata()) w.set(k, v);
    for (const auto& t : file->tensors())
        if (t.name != "blk.0.ssm_ba.weight") w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
    const std::string broken = pagoda::test::temp_path("qwen3next_no_ba.gguf");
    w.write(broken);
    try {
        open_step_model(broken, {.threads = 1, .tokens_wanted = 16});
        ADD_FAILURE() << "a qwen3next file without ssm_ba was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("blk.0.ssm_ba.weight is missing"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::model
