// config.json -> GGUF metadata for real-world config shapes (the random folders cover only what
// gen-model writes): Llama 3.1 rope_scaling, Gemma 3's nested text_config with its defaults and
// tensor prefix, Mistral's head_dim, Phi-3 LongRoPE; and refusals that name the key.
#include <gtest/gtest.h>

#include "hf/hf_test_util.h"
#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf {
namespace {

using config_test::meta;
using config_test::config_error;

const char* kLlama31 = R"({"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,
  "num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"max_position_embeddings":131072,
  "rms_norm_eps":1e-05,"rope_theta":500000.0,"tie_word_embeddings":false,
  "rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"}})";

TEST(HfConfig, Llama31MapsToLlamaKeys) {
    const HfModel m = read_hf_config(kLlama31, "config.json");
    EXPECT_EQ(m.arch, "llama");
    EXPECT_TRUE(m.permute_qk);
    EXPECT_EQ(*meta(m, "llama.attention.head_count_kv")->as_int(), 8);
    EXPECT_EQ(*meta(m, "llama.rope.scaling.type")->as_string(), "llama3");
    EXPECT_EQ(*meta(m, "llama.rope.scaling.original_context_length")->as_int(), 8192);
    EXPECT_FLOAT_EQ(float(*meta(m, "llama.rope.freq_base")->as_float()), 500000.0f);
    EXPECT_EQ(meta(m, "tokenizer.ggml.model"), nullptr);  // config.json's ids are no tokenizer
    EXPECT_EQ(gguf_target(m, "model.layers.3.self_attn.k_proj.weight")->gguf_name, "blk.3.attn_k.weight");
    EXPECT_EQ(gguf_target(m, "model.layers.3.self_attn.k_proj.weight")->transform, Transform::permute_k);
    EXPECT_EQ(gguf_target(m, "lm_head.weight")->gguf_name, "output.weight");
    EXPECT_THROW(gguf_target(m, "model.layers.32.self_attn.k_proj.weight"), Error);  // past the layer count
    EXPECT_FALSE(gguf_target(m, "model.layers.0.self_attn.rotary_emb.inv_freq"));
}

TEST(HfConfig, Gemma3ConditionalGenerationReadsTextConfigWithDefaults) {
    const HfModel m = read_hf_config(R"({"architectures":["Gemma3ForConditionalGeneration"],
      "text_config":{"hidden_size":2560,"intermediate_size":10240,"num_hidden_layers":34,"model_type":"gemma3_text",
      "sliding_window":1024,"rope_scaling":{"factor":8.0,"rope_type":"linear"}},"vision_config":{}})", "config.json");
    EXPECT_EQ(m.arch, "gemma3");
    EXPECT_EQ(m.head_dim, 256);  // Gemma3TextConfig's default
    EXPECT_EQ(*meta(m, "gemma3.attention.head_count")->as_int(), 8);
    EXPECT_EQ(*meta(m, "gemma3.attention.sliding_window")->as_int(), 1024);
    EXPECT_EQ(*meta(m, "gemma3.attention.sliding_window_pattern")->as_int(), 6);
    EXPECT_EQ(*meta(m, "gemma3.rope.scaling.type")->as_string(), "linear");
    EXPECT_FLOAT_EQ(float(*meta(m, "gemma3.rope.freq_base_swa")->as_float()), 10000.0f);
    EXPECT_TRUE(m.tied && m.norm_plus_one && !m.permute_qk);
    EXPECT_EQ(gguf_target(m, "language_model.model.layers.0.self_attn.q_norm.weight")->transform, Transform::plus_one);
    EXPECT_EQ(gguf_target(m, "model.language_model.layers.0.pre_feedforward_layernorm.weight")->gguf_name, "blk.0.ffn_norm.weight");
    EXPECT_FALSE(gguf_target(m, "vision_tower.vision_model.embeddings.patch_embedding.weight"));
}

TEST(HfConfig, MixtralAndQwenMoeExperts) {
    const HfModel m = read_hf_config(R"({"architectures":["MixtralForCausalLM"],"hidden_size":64,"intermediate_size":96,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,"rms_norm_eps":1e-5,
      "num_local_experts":8,"num_experts_per_tok":2})", "config.json");
    const auto t = gguf_target(m, "model.layers.1.block_sparse_moe.experts.7.w2.weight");
    EXPECT_EQ(t->gguf_name, "blk.1.ffn_down_exps.weight");
    EXPECT_EQ(t->expert, 7);
    EXPECT_THROW(gguf_target(m, "model.layers.1.block_sparse_moe.experts.8.w2.weight"), Error);
    EXPECT_NE(config_error(R"({"architectures":["Qwen2MoeForCausalLM"],"hidden_size":64,"intermediate_size":96,
      "num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":512,"rms_norm_eps":1e-5,"num_experts":4,
      "num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":64,"decoder_sparse_step":2})")
                  .find("'decoder_sparse_step'"),
              std::string::npos);
}

TEST(HfConfig, RefusalsNameTheKey) {
    EXPECT_NE(config_error("{").find("not valid JSON"), std::string::npos);
    EXPECT_NE(config_error("{}").find("'architectures'"), std::string::npos);
    EXPECT_NE(config_error(R"({"architectures":["FalconForCausalLM"]})").find("'FalconForCausalLM' is not supported"), std::string::npos);
    std::string no_eps = kLlama31;
    no_eps.replace(no_eps.find("\"rms_norm_eps\":1e-05"), 20, "\"x\":1");
    EXPECT_NE(config_error(no_eps).find("key 'rms_norm_eps' is missing"), std::string::npos) << config_error(no_eps);
    std::string yarn = kLlama31;
    yarn.replace(yarn.find("\"llama3\""), 8, "\"yarn\"");
    EXPECT_NE(config_error(yarn).find("rope_scaling' has type 'yarn'"), std::string::npos) << config_error(yarn);
    std::string heads = kLlama31;
    heads.replace(heads.find("\"num_attention_heads\":32"), 24, "\"num_attention_heads\":\"32\"");
    EXPECT_NE(config_error(heads).find("'num_attention_heads' must be an integer, got string"), std::string::npos) << config_error(heads);
    EXPECT_NE(config_error(R"({"architectures":["Gemma2ForCausalLM"],"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
      "num_attention_heads":4,"head_dim":16,"max_position_embeddings":512,"rms_norm_eps":1e-6,"query_pre_attn_scalar":144})")
                  .find("'query_pre_attn_scalar'"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::hf
