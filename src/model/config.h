// Hyper-parameters of a decoder-only model, read from GGUF metadata ("{arch}.*" keys): those every
// architecture shares; an architecture's own keys (soft caps, windows, LongRoPE) are read by its
// builder (model/arch/). Supported architectures: `llama` (Llama 2/3, Mistral, TinyLlama, the stories
// models; adjacent-pair RoPE), `qwen2` (Q/K/V biases, NEOX RoPE), `qwen3` (per-head Q/K RMSNorm, NEOX
// RoPE), `gemma2`, `gemma3` and `phi3` (NEOX RoPE), and the mixture-of-experts ones: `llama` with
// {arch}.expert_count > 0 (Mixtral), `qwen2moe` (qwen2 with routed experts and a gated shared
// expert), `qwen3moe` (qwen3 with routed experts), `gpt-oss` (biased attention with sinks, YaRN,
// alternating sliding layers, biased experts with a clamped SwiGLU) and `deepseek2` (multi-head latent
// attention, leading dense layers, routed plus ungated shared experts), `glm4moe` (GLM-4.5: QKV biases,
// optional Q/K norms, partial NEOX RoPE, leading dense layers, sigmoid router with a correction bias,
// ungated shared experts), `minimax-m2` (MiniMax-M2: Q/K RMSNorm over the whole projected rows,
// partial NEOX RoPE, every layer routed experts with a sigmoid router and a selection bias); the dense `glm4` (GLM-4-0414: sandwich norms, fused gate|up, partial
// RoPE) and `smollm3` (llama with every 4th layer NoPE); and the encoders `bert` (BERT, RoBERTa / XLM-R as
// llama.cpp converts them) and `nomic-bert` (NEOX RoPE, SwiGLU): embedding models with no output head. Anything else is refused with a clear error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

enum class RopeStyle { normal, neox };  // normal: pairs (2i, 2i+1); neox: pairs (i, i + n_rot/2)

struct ModelConfig {
    std::string arch;
    std::string name;
    int64_t n_layers = 0;
    int64_t dim = 0;         // embedding width
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t head_dim = 0;    // per-head width of Q, K and V
    int64_t ffn_dim = 0;     // the widest layer's FFN (every layer's unless layer_ffn_dims is set)
    // {arch}.feed_forward_length as an array (Gemma 4's E2B/E4B): one width per block, else empty.
    std::vector<int64_t> layer_ffn_dims;
    int64_t vocab_size = 0;
    int64_t context_length = 0;  // trained context (metadata)
    float rms_eps = 1e-5f;
    float rope_theta = 10000.0f;
    int64_t rope_dims = 0;       // leading dimensions of each head that rotate
    float rope_linear_scale = 1.0f;  // positions are divided by this (linear "position interpolation")
    RopeStyle rope_style = RopeStyle::normal;
    std::string rope_scaling = "none";  // "llama3", "longrope": applied by the builder
    int64_t max_context = 0;     // the context this load runs at (0: context_length); set by the loader
    bool qkv_bias = false;
    // Encoders (`bert`, `nomic-bert`): the LayerNorm epsilon ({arch}.attention.layer_norm_epsilon) and
    // whether the attention is causal ({arch}.attention.causal; false unless the file says otherwise).
    float norm_eps = 1e-12f;
    bool causal = true;
    // Mixture of experts (0 experts: a dense FFN of ffn_dim).
    int64_t n_experts = 0;          // {arch}.expert_count
    int64_t n_experts_used = 0;     // {arch}.expert_used_count (top-k)
    int64_t expert_ffn_dim = 0;     // {arch}.expert_feed_forward_length, else feed_forward_length
    int64_t shared_expert_ffn_dim = 0;  // qwen2moe: {arch}.expert_shared_feed_forward_length
    // Renormalise the top-k weights to sum 1: {arch}.expert_weights_norm where present, else what
    // llama.cpp does for the architecture (llama, qwen3moe: yes; qwen2moe: no).
    bool expert_weights_norm = true;
    // The router's scoring, {arch}.expert_gating_func as llama.cpp numbers it: 1 softmax, 2 sigmoid,
    // 3 softmax over the selected top-k (gpt-oss's default); the routed scaling factor
    // ({arch}.expert_weights_scale, 1 when absent); group-limited top-k ({arch}.expert_group_count,
    // {arch}.expert_group_used_count; 0: none).
    int64_t expert_gating = 1;
    float expert_weights_scale = 1.0f;
    int64_t expert_groups = 0, expert_groups_used = 0;

    // deepseek2 (DeepSeek V2 / V3, Kimi K2, ...): multi-head latent attention, read by read_mla. Its
    // queries and keys have head_dim = qk_nope_dim + rope_dims values per head (the RoPE part shared by
    // every head's key), its values v_head_dim; Q comes from h through a rank q_lora_rank bottleneck
    // (0: one plain attn_q), K's no-RoPE part and V from a rank kv_lora_rank latent. The cache stores
    // the decompressed per-head K and V (n_kv_heads = n_heads, V padded to head_dim), the "naive" form.
    int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, v_head_dim = 0;
    // Not from the file: the absorbed form (StepModelOptions::mla), whose cache holds one latent row
    // [k_pe, c] of rope_dims + kv_lora_rank values a token and layer (BuiltModel's kv shape).
    bool mla_absorbed = false;
    int64_t leading_dense_layers = 0;  // {arch}.leading_dense_block_count: layers before the first MoE one
    int64_t n_shared_experts = 0;      // deepseek2, glm4moe: {arch}.expert_shared_count (ungated, FFN = count x expert FFN)
    double yarn_log_multiplier = 0;    // deepseek2: {arch}.rope.scaling.yarn_log_multiplier (0.1 x mscale_all_dim)
    // deepseek2, glm4moe: {arch}.nextn_predict_layers, trailing multi-token-prediction blocks that are stored but
    // not run (n_layers counts the blocks run).
    int64_t nextn_layers = 0;
    // qwen3vl: {arch}.n_deepstack_layers, the image-embedding slices added after the first layers; an
    // image row's given embedding has dim x (1 + n_deepstack_layers) values.
    int64_t n_deepstack_layers = 0;

    int64_t input_embedding_width() const { return dim * (1 + n_deepstack_layers); }
    int64_t layer_ffn_dim(int64_t layer) const {
        return layer_ffn_dims.empty() ? ffn_dim : layer_ffn_dims.at(size_t(layer));
    }
    int64_t q_dim() const { return n_heads * head_dim; }
    int64_t kv_dim() const { return n_kv_heads * head_dim; }
    std::string describe() const;
};

// Reads and validates the hyper-parameters; vocab size comes from the token list or embedding.
ModelConfig read_config(const gguf::File& file);

}  // namespace pagoda::model
