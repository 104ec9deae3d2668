// The llama graph with the switches of the architectures that reuse it (qwen2: Q/K/V biases; qwen3:
// RMSNorm of each Q and K head before RoPE; their NEOX RoPE comes from the config). A config with
// experts (ModelConfig::n_experts > 0) gets the mixture-of-experts FFN of moe_ffn.h in every layer.
#pragma once
#include "model/arch/arch.h"

namespace pagoda::model {

struct LlamaVariant {
    bool qkv_bias = false;
    bool qk_norm = false;  // blk.N.attn_q_norm / attn_k_norm, [head_dim] each
    bool shared_expert = false;  // qwen2moe: a sigmoid-gated shared expert beside the routed ones
};

BuiltModel build_llama_family(const gguf::File& file, const ModelConfig& config, backend::Backend& backend,
                              const LlamaVariant& variant);

}  // namespace pagoda::model
