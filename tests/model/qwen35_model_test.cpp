// qwen35 / qwen35moe (Qwen3.5's hybrid of gated DeltaNet and gated full attention layers) end to end, as
// gen-model writes them with llama.cpp's names and keys: the reference backend's logits against a
// direct evaluation of the architecture's equations written out here from the file's tensors (no
// pagoda graph code: the conv over q|k|v, L2-normed heads, softplus decay, sigmoid write gate, the
// delta rule, the gated RMSNorm, the query|gate interleave of attn_q, partial NEOX RoPE); the CPU
// backend against the reference at F32 and Q8_0, prefill and decode; the recurrent state per
// sequence slot: chunked prefill == token by token (to float rounding on the CPU, whose delta rule
// runs a slot's tokens of a step in chunks), a sequence alone == batched with another (bitwise), a
// forked slot == its parent, a slot reused from position 0 == fresh; and the batch
// checks that keep a state consistent, refused by name.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/cpu/ops/recurrent.h"
#include "backend/cpu/matmul_test_util.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "hybrid_direct.h"
#include "model_compare.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

using model_compare::prompt;
using model_compare::reference_logits;
using direct::sigmoid;
using direct::silu;

RandomModelSpec qwen35_spec(const std::string& arch, uint64_t seed) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 4; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 96; s.vocab_size = 300;
    if (arch == "qwen35moe") {
        s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.shared_expert_ffn_dim = 48;
    }
    s.seed = seed;
    return s;
}

std::string write(const RandomModelSpec& spec, const std::string& name, const std::string& quant = "") {
    return model_compare::write_model(spec, "qwen35_" + name, quant);
}

// --- the equations, evaluated directly from an F32 file (dense qwen35) ----------------------------

struct Direct : direct::Weights {
    int64_t key(const std::string& k) const { return f.get_int("qwen35." + k); }
    static std::vector<double> norm(std::vector<double> x, const float* w, double eps) {
        direct::rms_norm_in_place(x.data(), x.size(), w, eps);
        return x;
    }

    std::vector<double> logits(const ModelConfig& c, const std::vector<int32_t>& ids) const {
        const int64_t T = int64_t(ids.size());
        const int64_t K = key("ssm.conv_kernel"), nk = key("ssm.group_count"), nv = key("ssm.time_step_rank");
        const int64_t dh = key("ssm.state_size"), kd = nk * dh, vd = nv * dh, cd = 2 * kd + vd;
        const double eps = c.rms_eps;
        std::vector<std::vector<double>> x = embed(ids, c.dim);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            std::vector<std::vector<double>> h(static_cast<size_t>(T)), mixed(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) h[size_t(t)] = norm(x[size_t(t)], tensor(p + "attn_norm.weight"), eps);
            if ((l + 1) % 4 != 0) {  // gated DeltaNet
                std::vector<std::vector<double>> in(static_cast<size_t>(T));
                for (int64_t t = 0; t < T; ++t) in[size_t(t)] = mul(tensor(p + "attn_qkv.weight"), h[size_t(t)], cd);
                const float* w = tensor(p + "ssm_conv1d.weight");
                std::vector<double> S(size_t(nv * dh * dh), 0.0);
                for (int64_t t = 0; t < T; ++t) {
                    const std::vector<double> conv = direct::conv_silu(w, in, t, K, cd);
                    const auto z = mul(tensor(p + "attn_gate.weight"), h[size_t(t)], vd);
                    const auto alpha = mul(tensor(p + "ssm_alpha.weight"), h[size_t(t)], nv);
                    const auto beta = mul(tensor(p + "ssm_beta.weight"), h[size_t(t)], nv);
                    std::vector<double> o(static_cast<size_t>(vd));
                    for (int64_t hv = 0; hv < nv; ++hv) {
                        const int64_t kh = hv % nk;  // value heads tiled over the key heads
                        direct::delta_rule_head(S.data() + hv * dh * dh, {conv.begin() + kh * dh, conv.begin() + (kh + 1) * dh},
                                                {conv.begin() + kd + kh * dh, conv.begin() + kd + (kh + 1) * dh},
                                                conv.data() + 2 * kd + hv * dh, z.data() + hv * dh,
                                                alpha[size_t(hv)] + tensor(p + "ssm_dt.bias")[hv], tensor(p + "ssm_a")[hv],
                                                beta[size_t(hv)], tensor(p + "ssm_norm.weight"), eps, dh, o.data() + hv * dh);
                    }
                    mixed[size_t(t)] = mul(tensor(p + "ssm_out.weight"), o, c.dim);
                }
            } else {
                mixed = direct::gated_attention(*this, p, h, c, eps);
            }
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(t)][size_t(i)] += mixed[size_t(t)][size_t(i)];
                const auto fin = norm(x[size_t(t)], tensor(p + "post_attention_norm.weight"), eps);
                const auto g = mul(tensor(p + "ffn_gate.weight"), fin, c.ffn_dim);
                auto u = mul(tensor(p + "ffn_up.weight"), fin, c.ffn_dim);
                for (size_t i = 0; i < u.size(); ++i) u[i] *= silu(g[i]);
                const auto y = mul(tensor(p + "ffn_down.weight"), u, c.dim);
                for (int64_t i = 0; i < c.dim; ++i) x[size_t(t)][size_t(i)] += y[size_t(i)];
            }
        }
        return output_logits(x, eps, c.vocab_size);
    }
};

TEST(Qwen35Direct, ReferenceBackendComputesTheHybridsEquations) {
    RandomModelSpec spec = qwen35_spec("qwen35", 81);
    spec.n_layers = 8;  // DeltaNet layers 0-2 and 4-6, full attention layers 3 and 7
    const std::string path = write(spec, "direct");
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.rope_dims, 4);  // a quarter of the 16-wide heads
    const std::vector<int32_t> ids = prompt(11);
    const auto want = Direct{*file}.logits(cfg, ids);
    const auto got = reference_logits(path, ids);
    ASSERT_GT(direct::largest_abs(want), 0.1);
    direct::expect_logits_near(got, want, 1e-4, "qwen35");
}

// --- the CPU backend against the reference -------------------------------------------------------

struct Case {
    std::string name, arch, quant;
    double tolerance;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class Qwen35Model : public ::testing::TestWithParam<Case> {};

TEST_P(Qwen35Model, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const std::string path = write(qwen35_spec(c.arch, 91), c.name, c.quant);
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64});
    EXPECT_EQ(model->info().n_state_slots, 16);
    EXPECT_EQ(model->info().kv_layout.n_layers, 1);  // only layer 3 attends
    const std::vector<int32_t> ids = prompt(19);
    const std::vector<float> expected = reference_logits(path, ids);
    model_compare::expect_matches_reference(*model, expected, ids, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Qwen35Model,
                         ::testing::Values(Case{"qwen35_f32", "qwen35", "", 1e-5}, Case{"qwen35_q8_0", "qwen35", "q8_0", 3e-2},
                                           Case{"qwen35moe_f32", "qwen35moe", "", 1e-5},
                                           Case{"qwen35moe_q8_0", "qwen35moe", "q8_0", 3e-2}),
                         [](const auto& info) { return info.param.name; });

// --- the recurrent state per slot (CPU, bitwise) --------------------------------------------------

// Steps built by hand: each sequence has its own KV blocks (block size 4) and state slot.
struct Stepper {
    StepModel& model;
    struct Seq {
        std::vector<int32_t> blocks;
        int32_t slot = 0;
        int32_t next = 0;  // its next position
    };
    // One step running `tokens[i]` for sequence seqs[i] from its next position; returns each
    // sequence's last-row logits.
    std::vector<std::vector<float>> step(std::vector<Seq*> seqs, const std::vector<std::vector<int32_t>>& tokens,
                                         std::vector<Batch::StateCopy> copies = {}) {
        Batch b;
        b.state_copies = std::move(copies);
        for (size_t i = 0; i < seqs.size(); ++i) {
            const int32_t s = b.add_sequence(seqs[i]->blocks, {}, seqs[i]->slot);
            for (size_t j = 0; j < tokens[i].size(); ++j) {
                const int32_t p = seqs[i]->next++;
                b.add(tokens[i][j], p, s, int64_t(seqs[i]->blocks[size_t(p / 4)]) * 4 + p % 4, j + 1 == tokens[i].size());
            }
        }
        const std::vector<float> all = model.forward(b);
        const size_t vocab = size_t(model.info().vocab_size);
        std::vector<std::vector<float>> out;
        for (size_t i = 0; i < seqs.size(); ++i) out.emplace_back(all.begin() + i * vocab, all.begin() + (i + 1) * vocab);
        return out;
    }
};

std::unique_ptr<StepModel> cpu_model(const std::string& path) {
    return open_step_model(path, {.threads = 2, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256,
                                  .state_slots = 4});
}

// With PAGODA_DELTA_RULE=chunked the CPU runs a slot's tokens of one step in the chunked form of the
// delta rule (its recurrence when the slot has one token): how a prompt is split into steps changes
// its logits only by float rounding, 1e-5 of each position's largest logit (77 tokens: steps of
// 64 + 13 cross a chunk). The default, token by token, keeps them bitwise (the engine tests).
TEST(Qwen35State, ChunkedPrefillAgreesWithTokenByToken) {
    struct Chunked {
        backend::cpu::DeltaRuleForm was = backend::cpu::delta_rule_form();
        Chunked() { backend::cpu::set_delta_rule_form(backend::cpu::DeltaRuleForm::chunked); }
        ~Chunked() { backend::cpu::set_delta_rule_form(was); }
    } chunked;
    const std::string path = write(qwen35_spec("qwen35", 101), "chunks");
    auto model = cpu_model(path);
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

TEST(Qwen35State, SequenceAloneEqualsBatchedForkedAndRecomputed) {
    const std::string path = write(qwen35_spec("qwen35moe", 103), "slots");
    auto model = cpu_model(path);
    Stepper st{*model};
    const std::vector<int32_t> a = prompt(8, 1), b = prompt(6, 2);
    const std::vector<int32_t> next = {5, 77, 140};
    // Alone: A's prompt, then three decodes.
    Stepper::Seq alone{{0, 1, 2}, 0};
    std::vector<std::vector<float>> want = {st.step({&alone}, {a})[0]};
    for (int32_t t : next) want.push_back(st.step({&alone}, {{t}})[0]);
    // Batched with B, in another slot; B runs a chunk of its prompt beside A's decodes.
    Stepper::Seq a2{{3, 4, 5}, 2}, other{{6, 7, 8}, 1};
    EXPECT_EQ(st.step({&other, &a2}, {{b[0], b[1], b[2]}, a})[1], want[0]);
    for (size_t i = 0; i < next.size(); ++i) {
        const std::vector<int32_t> bt = i == 0 ? std::vector<int32_t>{b[3], b[4], b[5]} : std::vector<int32_t>{int32_t(i)};
        EXPECT_EQ(st.step({&a2, &other}, {{next[i]}, bt})[0], want[i + 1]) << "decode " << i;
    }
    // Forked: a child takes A's prompt state (slot copy) and shares its two full KV blocks.
    Stepper::Seq parent{{9, 10, 11}, 3};
    EXPECT_EQ(st.step({&parent}, {a})[0], want[0]);
    Stepper::Seq child{{9, 10, 12}, 0, 8};
    const auto both = st.step({&parent, &child}, {{next[0]}, {next[0]}}, {{3, 0}});
    EXPECT_EQ(both[0], want[1]);
    EXPECT_EQ(both[1], want[1]) << "the forked slot continues as its parent";
    EXPECT_EQ(st.step({&child}, {{next[1]}})[0], want[2]);
    // Recomputed (a preempted sequence's rerun): slot 3 reused from position 0 forgets what it held.
    Stepper::Seq again{{13, 14, 15}, 3};
    EXPECT_EQ(st.step({&again}, {a})[0], want[0]);
    EXPECT_EQ(st.step({&again}, {{next[0]}})[0], want[1]);
}

TEST(Qwen35State, BatchesThatWouldCorruptAStateAreRefusedByName) {
    const std::string path = write(qwen35_spec("qwen35", 107), "refusals");
    auto model = cpu_model(path);
    auto error_of = [&](const Batch& b) {
        try {
            model->forward(b);
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    Batch b;
    const int32_t s = b.add_sequence({0, 1});
    b.add(5, 0, s, 0, true);
    EXPECT_NE(error_of(b).find("0 state slots for 1 sequences"), std::string::npos) << error_of(b);
    b.seq_state = {4};
    EXPECT_NE(error_of(b).find("state slot 4, outside the 4 slots"), std::string::npos) << error_of(b);
    b.seq_state = {1};
    EXPECT_EQ(error_of(b), "");
    Batch skip;
    skip.add_sequence({0, 1}, {}, 1);
    skip.add(6, 3, 0, 3, true);  // the slot holds 1 token: position 3 would skip two
    EXPECT_NE(error_of(skip).find("continues at position 3 but its state slot 1 holds 1 tokens"), std::string::npos)
        << error_of(skip);
    Batch shared;
    shared.add_sequence({0, 1}, {}, 1);
    shared.add_sequence({2, 3}, {}, 1);
    shared.add(6, 1, 0, 1, true);
    shared.add(7, 0, 1, 8, true);
    EXPECT_NE(error_of(shared).find("share state slot 1"), std::string::npos) << error_of(shared);
    Batch copy;
    copy.state_copies = {{1, 1}};
    EXPECT_NE(error_of(copy).find("state copy 1 -> 1"), std::string::npos) << error_of(copy);
    // Partial offload and LoRA are refused by name.
    try {
        open_step_model(path, {.threads = 2, .tokens_wanted = 64, .lora = true});
        ADD_FAILURE() << "LoRA on a hybrid was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("LoRA adapters on a model with recurrent layers"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::model
