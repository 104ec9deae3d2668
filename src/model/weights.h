// The model's tensors bound by name from a GGUF file and checked against the configuration.
// Matrices stay in the file mapping (zero copy) as kernel weight views, except that the matmul
// weights of types with a repacked kernel on this CPU (kernels::pack_weight) also get a packed copy;
// small vectors (norms, biases, RoPE frequency factors) are converted to f32 once at load.
#pragma once
#include <vector>

#include "kernels/cpu/matmul.h"
#include "model/config.h"

namespace pagoda::model {

struct LayerWeights {
    std::vector<float> attn_norm, ffn_norm;
    // Q, K, V: one weight stacked [Q | K | V] by rows, or three (see stack_if_packed in weights.cpp).
    std::vector<kernels::PackedWeight> qkv;
    kernels::PackedWeight wo;
    std::vector<float> bq, bk, bv;  // empty unless the architecture has QKV biases
    // gate, up: one weight stacked [gate | up], or two.
    std::vector<kernels::PackedWeight> gate_up;
    kernels::PackedWeight w_down;
};

struct ModelWeights {
    kernels::WeightView token_embd;  // rows = vocab, cols = dim
    std::vector<float> output_norm;
    kernels::PackedWeight output;    // the embedding itself when the head is tied
    bool tied_output = false;
    std::vector<float> rope_freq_factors;  // llama3-style per-frequency divisors; empty if absent
    std::vector<LayerWeights> layers;
};

// Throws pagoda::Error naming the tensor when one is missing, misshapen or of an unsupported type.
ModelWeights bind_weights(const gguf::File& file, const ModelConfig& config);

}  // namespace pagoda::model
