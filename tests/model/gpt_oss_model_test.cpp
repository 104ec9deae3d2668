// gpt-oss end to end, as gen-model writes it with llama.cpp's tensor names and keys: the config
// read back (YaRN, the softmax of the selected experts, no renormalisation), the graph's alternating
// sliding layers and sinks, the CPU backend's logits against the reference backend's as one prefill
// and token by token past the window, at F32 and with MXFP4 experts (as gpt-oss GGUFs store them)
// and Q8_0; and load errors naming a missing sink tensor or YaRN key.
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
#include "model/arch/rope_frequencies.h"
#include "model/config.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "model_compare.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

using gguf_edit::without;
using gguf_edit::load_error;

RandomModelSpec gpt_oss_spec(uint64_t seed) {
    RandomModelSpec s;
    s.arch = "gpt-oss";
    s.n_layers = 3; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 16; s.ffn_dim = 64; s.vocab_size = 300;
    s.n_experts = 4; s.n_experts_used = 2; s.sliding_window = 6; s.rope_theta = 150000.0f; s.seed = seed;
    return s;
}

struct Case {
    std::string name;
    bool mxfp4_experts = false;
    std::string quant;  // "" or a `pagoda quantize` target
    // Max |cpu - reference| relative to the largest |reference logit|: f32 sums for F32 weights; the
    // cpu's packed paths quantise activations to int8 per 32 values for block types (MXFP4, Q8_0),
    // where the reference multiplies the same stored weights in doubles.
    double tolerance;
};

std::string model_path(const Case& c) {
    RandomModelSpec spec = gpt_oss_spec(51);
    spec.mxfp4_experts = c.mxfp4_experts;
    return model_compare::write_model(spec, "gpt_oss_" + c.name, c.quant);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GptOssModel : public ::testing::TestWithParam<Case> {};

TEST_P(GptOssModel, ForwardMatchesTheReferenceBackend) {
    const Case& c = GetParam();
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(model_path(c)));
    const ModelConfig cfg = read_config(*file);
    EXPECT_EQ(cfg.arch, "gpt-oss");
    EXPECT_EQ(cfg.rope_scaling, "yarn");
    EXPECT_EQ(cfg.rope_style, RopeStyle::neox);
    EXPECT_EQ(cfg.expert_gating, 3);
    EXPECT_FALSE(cfg.expert_weights_norm);
    if (c.mxfp4_experts) { EXPECT_EQ(file->find_tensor("blk.0.ffn_up_exps.weight")->type, gguf::GgmlType::MXFP4); }
    // Decodes past the 6-token window of layers 0 and 2.
    model_compare::expect_cpu_matches_reference(file, true, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, GptOssModel,
                         ::testing::Values(Case{"f32", false, "", 1e-5}, Case{"mxfp4_experts", true, "", 3e-2},
                                           Case{"q8_0", false, "q8_0", 3e-2}),
                         [](const auto& info) { return info.param.name; });

// The graph: even layers slide (window 6), odd ones are global; every attention has its sinks; the
// YaRN mscale is folded into the scale as mscale^2 / sqrt(rope dims).
TEST(GptOssGraph, AlternatingWindowsSinksAndTheYarnScale) {
    const std::string path = test::temp_path("gpt_oss_graph.gguf");
    write_random_model(gpt_oss_spec(52), nullptr, path);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(path));
    const ModelConfig cfg = read_config(*file);
    auto backend = backend::make_backend("reference");
    const BuiltModel m = find_arch_builder("gpt-oss")(*file, cfg, *backend);
    const double mscale = 1 + 0.1 * std::log(32.0);
    int attentions = 0;
    for (const Node& n : m.graph.nodes) {
        if (n.kind != OpKind::attention) continue;
        EXPECT_EQ(n.attention.sliding_window, n.layer % 2 == 0 ? 6 : 0) << "layer " << n.layer;
        EXPECT_NE(n.attention.sinks, nullptr);
        EXPECT_NEAR(n.attention.scale, mscale * mscale / 4.0, 1e-6);
        ++attentions;
    }
    EXPECT_EQ(attentions, 3);
}

TEST(GptOssErrors, NameTheMissingTensorOrKey) {
    const std::string full = test::temp_path("gpt_oss_errors.gguf");
    write_random_model(gpt_oss_spec(53), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    const std::string cut = test::temp_path("gpt_oss_errors_cut.gguf");
    for (const std::string drop : {"blk.1.attn_sinks.weight", "blk.0.post_attention_norm.weight", "blk.2.attn_output.bias",
                                   "blk.0.ffn_gate_inp.weight"}) {
        without(full, cut, drop);
        EXPECT_NE(load_error(cut).find("tensor " + drop + " is missing"), std::string::npos) << load_error(cut);
    }
    without(full, cut, "gpt-oss.attention.sliding_window");
    EXPECT_NE(load_error(cut).find("gpt-oss.attention.sliding_window is missing"), std::string::npos) << load_error(cut);
    without(full, cut, "gpt-oss.rope.scaling.type");
    EXPECT_NE(load_error(cut).find("expected yarn"), std::string::npos) << load_error(cut);
}

// Gate and up fused the way newer converters can write them (ffn_gate_up_exps.weight [dim, 2 ffn, E]
// and its bias [2 ffn, E], each expert's gate rows then its up rows) give bitwise the logits of the
// separate tensors.
TEST(GptOssLayouts, FusedGateUpExpertsLoadLikeTheSeparateOnes) {
    const std::string separate = test::temp_path("gpt_oss_separate.gguf");
    write_random_model(gpt_oss_spec(54), nullptr, separate);
    auto in = gguf::File::open(separate);
    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    for (const auto& t : in->tensors()) {
        const bool gate = t.name.find("ffn_gate_exps") != std::string::npos;
        if (t.name.find("ffn_up_exps") != std::string::npos) continue;  // joined with its gate below
        if (!gate) {
            w.add_tensor(t.name, t.type, t.shape, t.data, t.n_bytes);
            continue;
        }
        std::string up_name = t.name;
        up_name.replace(up_name.find("gate_exps"), 9, "up_exps");
        const auto* up = in->find_tensor(up_name);
        ASSERT_NE(up, nullptr);
        const int64_t experts = t.shape.back();
        const size_t per = size_t(t.n_bytes) / size_t(experts);  // one expert's slice
        std::vector<uint8_t> bytes;
        for (int64_t e = 0; e < experts; ++e) {
            bytes.insert(bytes.end(), t.data + size_t(e) * per, t.data + size_t(e + 1) * per);
            bytes.insert(bytes.end(), up->data + size_t(e) * per, up->data + size_t(e + 1) * per);
        }
        std::vector<int64_t> shape = t.shape;
        shape[shape.size() - 2] *= 2;
        std::string name = t.name;
        name.replace(name.find("gate_exps"), 9, "gate_up_exps");
        w.add_tensor(name, t.type, shape, std::move(bytes));
    }
    const std::string fused = test::temp_path("gpt_oss_fused.gguf");
    w.write(fused);
    ASSERT_NE(gguf::File::open(fused)->find_tensor("blk.0.ffn_gate_up_exps.bias"), nullptr);
    std::vector<int32_t> ids;
    for (int i = 0; i < 11; ++i) ids.push_back((i * 41 + 3) % 300);
    std::vector<std::vector<float>> logits;
    for (const std::string& path : {separate, fused}) {
        auto model = open_step_model(path, {.threads = 2, .tokens_wanted = 32});
        SequenceRunner runner(*model, false);
        logits.push_back(runner.prefill(0, ids, 32, true));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0);
}

// YaRN's frequencies as ggml computes them, worked out by hand for dims 8, theta 10^4, original
// context 4096, factor 32, beta 32 / 1: the ramp's corners c(32) = 8 ln(4096 / 64 pi) / (2 ln 10^4)
// = 1.309 -> floor 1 and c(1) = 8 ln(4096 / 2 pi) / (2 ln 10^4) = 2.814 -> ceil 3, so pairs 0 and 1
// keep theta_i (extrapolated), pair 2 is half way, pair 3 is theta_i / 32 (interpolated).
TEST(YarnRope, FrequenciesAndMscaleByHand) {
    YarnRopeScaling y;
    y.factor = 32;
    y.original_context = 4096;
    const backend::RopeSpec spec = yarn_rope_spec(8, true, 10000.0, y);
    ASSERT_EQ(spec.inv_freq.size(), 4u);
    EXPECT_DOUBLE_EQ(spec.inv_freq[0], 1.0);
    EXPECT_NEAR(spec.inv_freq[1], 0.1, 1e-15);
    EXPECT_NEAR(spec.inv_freq[2], 0.01 * (0.5 / 32 + 0.5), 1e-15);
    EXPECT_NEAR(spec.inv_freq[3], 0.001 / 32, 1e-15);
    EXPECT_NEAR(yarn_mscale(y), 1.3465735902799727, 1e-12);  // 1 + 0.1 ln 32
    y.attn_factor = 2;
    EXPECT_NEAR(yarn_mscale(y), 2 * 1.3465735902799727, 1e-12);
    y.ext_factor = 0;  // no extrapolation: every pair interpolated, no temperature
    const backend::RopeSpec plain = yarn_rope_spec(8, true, 10000.0, y);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(plain.inv_freq[size_t(i)], std::pow(10000.0, -i / 4.0) / 32, 1e-15);
    EXPECT_EQ(yarn_mscale(y), 2.0);
}

}  // namespace
}  // namespace pagoda::model
