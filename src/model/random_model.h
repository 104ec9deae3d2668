// Random-weight llama-family GGUF models for tests and benchmarks (`pagoda gen-model`).
// Shapes come from a preset or explicit sizes. The vocabulary is copied from a vocabulary GGUF when
// one is given (so generated ids decode to real pieces), else a synthetic SentencePiece vocabulary
// (byte fallback + letter n-grams) is written. Weights are scaled (std 1/sqrt(fan-in), output
// projections further by 1/sqrt(2·layers)) so activations stay finite over long generations.
#pragma once
#include <cstdint>
#include <string>

#include "gguf/ggml_types.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct RandomModelSpec {
    // llama, qwen2 (QKV bias, NEOX RoPE), qwen3 (Q/K norms, NEOX RoPE), qwen2moe or qwen3moe
    std::string arch = "llama";
    std::string name = "random";
    int64_t n_layers = 2, dim = 64, n_heads = 4, n_kv_heads = 2, ffn_dim = 160;
    int64_t vocab_size = 512;    // used only for the synthetic vocabulary
    int64_t context_length = 2048;
    int64_t head_dim = 0;        // 0: dim / n_heads
    float rope_theta = 10000.0f;
    bool tied_output = false;
    gguf::GgmlType type = gguf::GgmlType::F32;  // matrices; norms and biases stay F32
    uint64_t seed = 1;
    // Mixture of experts: n_experts > 0 replaces every FFN by a router and stacked experts
    // (ffn_*_exps, [cols, rows, n_experts]); required for qwen2moe / qwen3moe, optional for llama
    // (Mixtral). The router's weights are scaled up (std 2/sqrt(dim)) so each token's top-k is decided
    // by clear margins.
    int64_t n_experts = 0, n_experts_used = 2;
    int64_t expert_ffn_dim = 0;         // 0: ffn_dim
    int64_t shared_expert_ffn_dim = 0;  // qwen2moe's shared expert; 0: 2 * the expert FFN width
};

// "tiny", "small" (~134 M parameters) or "tinyllama" (~1.1 B); throws on other names.
RandomModelSpec random_model_preset(const std::string& name);

// Writes the model; `vocab` may be null (synthetic vocabulary). Returns the parameter count.
int64_t write_random_model(const RandomModelSpec& spec, const gguf::File* vocab, const std::string& path);

}  // namespace pagoda::model
