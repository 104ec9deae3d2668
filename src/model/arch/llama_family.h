// The llama graph with the switches of the architectures that reuse it (qwen2: Q/K/V biases; qwen3:
// RMSNorm of each Q and K head before RoPE, or of the whole Q and K rows for minimax-m2; their NEOX
// RoPE comes from the config). A config with
// experts (ModelConfig::n_experts > 0) gets the mixture-of-experts FFN of moe_ffn.h in every layer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/arch.h"

namespace pagoda::model {

struct LlamaVariant {
    bool qkv_bias = false;
    bool qk_norm = false;  // blk.N.attn_q_norm / attn_k_norm, [head_dim] each
    // minimax-m2: the Q/K norms span the whole projected row (attn_q_norm [n_heads x head_dim],
    // attn_k_norm [n_kv_heads x head_dim]), one RMS over all heads, before the split into heads.
    bool qk_norm_whole_row = false;
    bool shared_expert = false;  // qwen2moe: a sigmoid-gated shared expert beside the routed ones
    bool shared_gate = true;     // false: the shared expert is not gated (glm4moe)
    bool optional_qkv_bias = false;  // glm4moe: the Q/K/V biases where the file has them (attention_bias)
    bool optional_qk_norm = false;  // glm4moe: the Q/K norms where the file has them (GLM-4.5 has, Air not)
    std::string ffn_norm = "ffn_norm";  // the FFN's input norm (glm4moe stores it as post_attention_norm)
    int32_t no_rope_period = 0;  // > 0: layers i with (i + 1) % period == 0 skip RoPE (smollm3's NoPE layers)
    // mistral3: a "yarn" config's frequencies, with the rotation unscaled (llama.cpp's mistral3 graph
    // cancels YaRN's mscale, as transformers does for mscale = mscale_all_dim = 1).
    bool yarn_unscaled = false;
    // mistral3: Llama 4's attention temperature on the queries after RoPE (beta 0: none).
    backend::AttnTemperature attn_temperature;
    // qwen3vl: M-RoPE's axis per rotary pair (backend::RopeSpec::pair_axis; empty: plain RoPE), image
    // rows (input_embeddings) and the deep-stack slices added after the first layers.
    std::vector<uint8_t> rope_pair_axis;
    bool image_input = false;
    int32_t deepstack_layers = 0;
};

BuiltModel build_llama_family(const gguf::File& file, const ModelConfig& config, backend::Backend& backend,
                              const LlamaVariant& variant);

}  // namespace pagoda::model
