// The glm tests' layouts and errors (glm_test_util.h's models): glm4moe's router and layer layout
// in the graph, smollm3's NoPE layers (and the llama twin of a file without one), mistral3's unscaled
// YaRN against a llama twin carrying the same rotation as rope_freqs.weight and its position bound,
// NextN blocks stored and not run, and load errors naming the key or tensor.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf_edit.h"
#include "glm_test_util.h"
#include "model/arch/arch.h"
#include "model/arch/rope_frequencies.h"
#include "model/config.h"

namespace pagoda::model {
namespace {

using gguf_edit::rewrite;
using gguf_edit::without;
using gguf_edit::load_error;

using glm_test::dense_spec;
using glm_test::glm4moe_spec;
using glm_test::prompt;
using glm_test::reference_logits;

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
// rotation) below the original context, where the attention temperature is 1; the temperature runs
// as one attn_temperature op a layer (length: the original context) and no longer bounds --ctx; a
// yarn_log_multiplier other than 0 or 1 is refused.
TEST(GlmGraph, Mistral3YarnUnscaledAndTemperatureOp) {
    RandomModelSpec s = dense_spec("mistral3", 95);
    s.context_length = 256;  // original context 64
    const std::string path = test::temp_path("glm_mistral3.gguf");
    write_random_model(s, nullptr, path);
    auto file = gguf::File::open(path);
    const ModelConfig cfg = read_config(*file);
    {
        auto model = open_step_model(path, {.backend = "reference", .tokens_wanted = 256, .max_context = 200});
        EXPECT_EQ(model->info().max_context, 200);
        const std::string graph = model->describe_graph(4, 1, false);
        EXPECT_NE(graph.find("attn_temperature " + std::to_string(s.n_layers)), std::string::npos) << graph;
        size_t ops = 0;
        for (size_t at = graph.find("beta 0.1 length 64"); at != std::string::npos; at = graph.find("beta 0.1 length 64", at + 1))
            ++ops;
        EXPECT_EQ(ops, size_t(s.n_layers)) << graph;
    }
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
    rewrite(nextn, cut, {.drop = {"glm4moe.nextn_predict_layers"}, .set = {{"glm4moe.block_count", gguf::Value::u32(3)}},
                         .drop_prefix = "blk.3."});
    EXPECT_EQ(reference_logits(nextn, prompt(7)), reference_logits(cut, prompt(7)));
}

TEST(GlmErrors, NameTheMissingOrInconsistentKeyOrTensor) {
    const std::string full = test::temp_path("glm_errors.gguf"), cut = test::temp_path("glm_errors_cut.gguf");
    write_random_model(glm4moe_spec(93), nullptr, full);
    ASSERT_EQ(load_error(full), "");
    for (const std::string key : {"glm4moe.expert_count", "glm4moe.expert_used_count", "glm4moe.block_count"}) {
        without(full, cut, key);
        EXPECT_NE(load_error(cut).find(key), std::string::npos) << key << ": " << load_error(cut);
    }
    for (const std::string tensor : {"blk.0.post_attention_norm.weight", "blk.1.ffn_up_shexp.weight", "blk.2.ffn_gate_inp.weight",
                                     "blk.0.ffn_gate.weight", "blk.1.attn_k_norm.weight", "blk.2.attn_v.bias"}) {
        without(full, cut, tensor);
        EXPECT_NE(load_error(cut).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(cut);
    }
    rewrite(full, cut, {.set = {{"glm4moe.nextn_predict_layers", gguf::Value::u32(3)}}});
    EXPECT_NE(load_error(cut).find("nextn_predict_layers = 3 must be 0..2"), std::string::npos) << load_error(cut);
    rewrite(full, cut, {.set = {{"glm4moe.leading_dense_block_count", gguf::Value::u32(9)}}});
    EXPECT_NE(load_error(cut).find("leading_dense_block_count = 9 must be 0..3"), std::string::npos) << load_error(cut);
    rewrite(full, cut, {.set = {{"glm4moe.rope.dimension_count", gguf::Value::u32(48)}}});
    EXPECT_NE(load_error(cut).find("RoPE dimension count 48 must be even and at most the head size 32"), std::string::npos)
        << load_error(cut);

    rewrite(full, cut, {.set = {{"glm4moe.rope.dimension_sections", gguf::Value::i32s({8, 12, 12, 0})}}});
    EXPECT_NE(load_error(cut).find("glm4moe.rope.dimension_sections (GLM-4.xV's multimodal RoPE) is not supported"),
              std::string::npos) << load_error(cut);

    const std::string mistral = test::temp_path("glm_errors_mistral3.gguf");
    write_random_model(dense_spec("mistral3", 96), nullptr, mistral);
    ASSERT_EQ(load_error(mistral), "");
    rewrite(mistral, cut, {.set = {{"mistral3.rope.scaling.yarn_log_multiplier", gguf::Value::f32(0.5f)}}});
    EXPECT_NE(load_error(cut).find("mistral3.rope.scaling.yarn_log_multiplier = 0.5 is not supported"), std::string::npos)
        << load_error(cut);

    const std::string dense = test::temp_path("glm_errors_glm4.gguf");
    write_random_model(dense_spec("glm4", 94), nullptr, dense);
    ASSERT_EQ(load_error(dense), "");
    for (const std::string tensor : {"blk.0.post_ffw_norm.weight", "blk.1.post_attention_norm.weight", "blk.0.ffn_up.weight"}) {
        without(dense, cut, tensor);
        EXPECT_NE(load_error(cut).find("tensor " + tensor + " is missing"), std::string::npos) << load_error(cut);
    }
    rewrite(dense, cut, {.set = {{"glm4.nextn_predict_layers", gguf::Value::u32(1)}}});
    EXPECT_NE(load_error(cut).find("glm4.nextn_predict_layers (GLM-OCR's NextN block) is not supported"), std::string::npos)
        << load_error(cut);
}

}  // namespace
}  // namespace pagoda::model
