// DeepSeek V3 / V2, Kimi K2 and GLM-4.7-Flash folders as GGUF deepseek2: the published configs map to
// the keys llama.cpp's converter (DeepseekV2Model) writes, kv_b_proj splits as its view / split /
// transpose does (checked on a hand-written example, not against the inverse), what the builder does
// not compute is refused naming the key, and either GGUF attention layout writes a folder that loads
// as the split one. The byte-for-byte and bitwise-logits round trips are hf_equivalence_test's cases.
#include <cstring>
#include <map>
#include <tuple>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf/hf_test_util.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_deepseek.h"
#include "hf/hf_tensor_names.h"
#include "model/model_file.h"
#include "model/random_model.h"

namespace pagoda::hf {
namespace {

// DeepSeek-V3's published config.json (its FP8 quantization_config left out).
constexpr const char* kDeepseekV3 = R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "attention_bias": false, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
    "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"}, "rope_theta": 10000,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false, "topk_group": 4,
    "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280})";

TEST(HfDeepseek, V3ConfigMapsToTheConvertersKeys) {
    const HfModel m = read_hf_config(kDeepseekV3, "config.json");
    EXPECT_EQ(m.arch, "deepseek2");
    EXPECT_FALSE(m.permute_qk);  // the checkpoint's RoPE rows are already adjacent pairs
    EXPECT_EQ(m.nextn_layers, 1);
    EXPECT_EQ(m.n_experts, 256);
    const auto got = config_test::metadata_map(m);
    for (const auto& [key, want] : std::vector<std::pair<std::string, int64_t>>{
             {"block_count", 61}, {"attention.head_count", 128}, {"attention.head_count_kv", 1},
             {"attention.q_lora_rank", 1536}, {"attention.kv_lora_rank", 512}, {"attention.key_length", 576},
             {"attention.value_length", 512}, {"attention.key_length_mla", 192}, {"attention.value_length_mla", 128},
             {"rope.dimension_count", 64}, {"leading_dense_block_count", 3}, {"feed_forward_length", 18432},
             {"expert_count", 256}, {"expert_used_count", 8}, {"expert_feed_forward_length", 2048},
             {"expert_shared_count", 1}, {"expert_gating_func", 2}, {"expert_group_count", 8},
             {"expert_group_used_count", 4}, {"rope.scaling.original_context_length", 4096}, {"context_length", 163840}}) {
        ASSERT_TRUE(got.count("deepseek2." + key)) << key;
        EXPECT_EQ(got.at("deepseek2." + key).as_int(), want) << key;
    }
    EXPECT_EQ(got.at("deepseek2.expert_weights_scale").as_float(), double(2.5f));
    EXPECT_EQ(got.at("deepseek2.expert_weights_norm").to_display(), "true");
    EXPECT_EQ(*got.at("deepseek2.rope.scaling.type").as_string(), "yarn");
    EXPECT_EQ(got.at("deepseek2.rope.scaling.factor").as_float(), 40.0);
    EXPECT_EQ(got.at("deepseek2.rope.scaling.yarn_log_multiplier").as_float(), double(0.1f));  // 0.1 x mscale_all_dim
    EXPECT_EQ(got.count("deepseek2.rope.scaling.yarn_beta_fast"), 0u);  // ggml's defaults, as given
    // The checkpoint's names.
    const auto t = [&](const char* name) { return gguf_target(m, name).value(); };
    EXPECT_EQ(t("model.layers.3.self_attn.q_a_proj.weight").gguf_name, "blk.3.attn_q_a.weight");
    EXPECT_EQ(t("model.layers.3.self_attn.q_a_layernorm.weight").gguf_name, "blk.3.attn_q_a_norm.weight");
    EXPECT_EQ(t("model.layers.3.self_attn.kv_a_proj_with_mqa.weight").gguf_name, "blk.3.attn_kv_a_mqa.weight");
    EXPECT_EQ(t("model.layers.3.self_attn.kv_b_proj.weight").transform, Transform::split_kv_b);
    EXPECT_EQ(t("model.layers.3.mlp.gate.e_score_correction_bias").gguf_name, "blk.3.exp_probs_b.bias");
    EXPECT_EQ(t("model.layers.60.mlp.experts.255.down_proj.weight").expert, 255);
    EXPECT_EQ(t("model.layers.0.mlp.gate_proj.weight").gguf_name, "blk.0.ffn_gate.weight");
    EXPECT_EQ(t("model.layers.9.mlp.shared_experts.up_proj.weight").gguf_name, "blk.9.ffn_up_shexp.weight");
    EXPECT_EQ(t("model.layers.9.post_attention_layernorm.weight").gguf_name, "blk.9.ffn_norm.weight");
    EXPECT_FALSE(gguf_target(m, "model.layers.61.eh_proj.weight").has_value());  // the NextN block: not run
}

// Kimi K2 (DeepseekV3ForCausalLM with its own YaRN betas), V2-Lite (no q_lora_rank, softmax, greedy) and
// GLM-4.7-Flash (Glm4MoeLiteForCausalLM; hidden_size not a multiple of the heads).
TEST(HfDeepseek, KimiV2LiteAndGlmFlashConfigs) {
    nlohmann::json kimi = nlohmann::json::parse(kDeepseekV3);
    kimi["model_type"] = "kimi_k2";
    kimi["num_attention_heads"] = 64; kimi["n_routed_experts"] = 384; kimi["n_group"] = 1; kimi["topk_group"] = 1;
    kimi["routed_scaling_factor"] = 2.827;
    kimi["rope_scaling"] = {{"beta_fast", 1.0}, {"beta_slow", 1.0}, {"factor", 32.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                            {"original_max_position_embeddings", 4096}, {"type", "yarn"}};
    auto got = config_test::metadata_map(read_hf_config(kimi.dump(), "config.json"));
    EXPECT_EQ(got.at("deepseek2.rope.scaling.yarn_beta_fast").as_float(), 1.0);
    EXPECT_EQ(got.count("deepseek2.rope.scaling.yarn_beta_slow"), 0u);  // 1 is ggml's default: not written
    EXPECT_EQ(got.at("deepseek2.expert_group_count").as_int(), 1);

    nlohmann::json lite = nlohmann::json::parse(kDeepseekV3);
    lite["architectures"] = {"DeepseekV2ForCausalLM"};
    lite["q_lora_rank"] = nullptr; lite["scoring_func"] = "softmax"; lite["topk_method"] = "greedy";
    lite["n_group"] = 1; lite["topk_group"] = 1; lite["norm_topk_prob"] = false; lite["first_k_dense_replace"] = 1;
    lite["rope_scaling"]["mscale"] = 0.707; lite["rope_scaling"]["mscale_all_dim"] = 0.707;
    lite.erase("num_nextn_predict_layers");
    const HfModel l = read_hf_config(lite.dump(), "config.json");
    got = config_test::metadata_map(l);
    EXPECT_EQ(got.count("deepseek2.attention.q_lora_rank"), 0u);
    EXPECT_EQ(got.at("deepseek2.expert_gating_func").as_int(), 1);
    EXPECT_EQ(got.at("deepseek2.rope.scaling.yarn_log_multiplier").as_float(), double(float(0.1 * 0.707)));
    EXPECT_EQ(gguf_target(l, "model.layers.0.self_attn.q_proj.weight")->gguf_name, "blk.0.attn_q.weight");

    nlohmann::json glm = nlohmann::json::parse(kDeepseekV3);
    glm["architectures"] = {"Glm4MoeLiteForCausalLM"};
    glm["hidden_size"] = 2048; glm["num_attention_heads"] = 20; glm["q_lora_rank"] = 768; glm["qk_nope_head_dim"] = 192;
    glm["v_head_dim"] = 256; glm["n_routed_experts"] = 64; glm["n_group"] = 1; glm["topk_group"] = 1;
    glm.erase("rope_scaling");
    got = config_test::metadata_map(read_hf_config(glm.dump(), "config.json"));
    EXPECT_EQ(got.at("deepseek2.attention.key_length_mla").as_int(), 256);
    EXPECT_EQ(got.at("deepseek2.attention.value_length_mla").as_int(), 256);
    EXPECT_EQ(got.count("deepseek2.rope.scaling.type"), 0u);
}

TEST(HfDeepseek, RefusesWhatTheBuilderDoesNotCompute) {
    const nlohmann::json good = nlohmann::json::parse(kDeepseekV3);
    for (const auto& [key, value, named] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
             {"scoring_func", "relu", "scoring_func"},
             {"topk_method", "group_limited_greedy", "topk_method"},  // V2's max-score group ranking
             {"topk_method", "aux_free", "topk_method"},
             {"topk_group", 9, "topk_group"},
             {"n_group", 7, "n_group"},
             {"rope_interleave", false, "rope_interleave"},
             {"quantization_config", {{"quant_method", "fp8"}}, "quantization_config"},
             {"v_head_dim", 300, "v_head_dim"},
             {"qk_rope_head_dim", 63, "qk_rope_head_dim"},
             {"moe_layer_freq", 2, "moe_layer_freq"},
             {"first_k_dense_replace", 62, "first_k_dense_replace"},
             {"kv_lora_rank", 0, "kv_lora_rank"},
             {"attention_bias", true, "attention_bias"},
             {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}, "rope_scaling"},
             {"rope_scaling", {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 4096}, {"mscale", 0.5},
                               {"mscale_all_dim", 1.0}}, "mscale"},
             {"rope_scaling", {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 4096}}, "mscale_all_dim"}}) {
        nlohmann::json j = good;
        j[key] = value;
        const std::string e = config_test::config_error(j.dump());
        EXPECT_NE(e.find(named), std::string::npos) << key << " = " << value.dump() << ": " << e;
    }
    nlohmann::json j = good;
    j.erase("qk_nope_head_dim");
    EXPECT_NE(config_test::config_error(j.dump()).find("qk_nope_head_dim"), std::string::npos);
}

// The converter: kv_b.view(H, nope + v, kv_lora); k_b, v_b = split(.., [nope, v], dim=1);
// k_b = k_b.transpose(1, 2). Here H = 2, nope = 2, v = 1, kv_lora = 3 with kv_b[r][c] = 10 r + c.
TEST(HfDeepseek, KvBSplitIsTheConvertersViewSplitTranspose) {
    std::vector<uint8_t> kv_b(18), k_b(12), v_b(6), back(18);
    for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 3; ++c) kv_b[size_t(r * 3 + c)] = uint8_t(10 * r + c);
    split_kv_b(kv_b.data(), k_b.data(), v_b.data(), 2, 2, 1, 3, 1);
    // k_b[h][i][j] = kv_b[h * 3 + j][i]: head 0's rows 0, 1 and head 1's rows 3, 4, transposed.
    EXPECT_EQ(k_b, (std::vector<uint8_t>{0, 10, 1, 11, 2, 12, 30, 40, 31, 41, 32, 42}));
    EXPECT_EQ(v_b, (std::vector<uint8_t>{20, 21, 22, 50, 51, 52}));  // rows 2 and 5 as they are
    join_kv_b(k_b.data(), v_b.data(), back.data(), 2, 2, 1, 3, 1);
    EXPECT_EQ(back, kv_b);
}

// A GGUF with the older unsplit attn_kv_b writes the same kv_b_proj, so its folder loads as the split
// GGUF of the same seed, tensor for tensor.
TEST(HfDeepseek, UnsplitGgufWritesTheSameFolder) {
    model::RandomModelSpec s;
    s.arch = "deepseek2"; s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.ffn_dim = 72; s.vocab_size = 300; s.head_dim = 16;
    s.seed = 5; s.context_length = 256; s.n_experts = 4; s.n_experts_used = 2; s.expert_ffn_dim = 32;
    const std::string dir = pagoda::test::temp_path("hf-deepseek-unsplit"), split = pagoda::test::temp_path("hf-deepseek-split.gguf");
    model::write_random_model_hf(s, dir);
    s.mla_split = true;
    model::write_random_model(s, nullptr, split);
    auto h = model::open_model_file(dir);
    auto g = model::open_model_file(split);
    EXPECT_EQ(h->find_tensor("blk.0.attn_kv_b.weight"), nullptr);
    for (const auto& t : g->tensors()) {
        const gguf::TensorInfo* v = h->find_tensor(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        EXPECT_EQ(v->shape, t.shape) << t.name;
        ASSERT_EQ(v->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name;
    }
    EXPECT_EQ(h->tensors().size(), g->tensors().size());
    EXPECT_EQ(h->get_int("deepseek2.attention.head_count_kv"), 1);
    EXPECT_EQ(h->get_int("deepseek2.attention.key_length_mla"), 16);
}

}  // namespace
}  // namespace pagoda::hf
