// The layers the gated DeltaNet hybrids share (qwen35 / qwen35moe and qwen3next): reading the DeltaNet
// shape and which layers are recurrent, the DeltaNet mixer after its input projections, the gated full
// attention, and the whole decoder around them. An architecture supplies only its input projections
// (how its file stores q|k|v, z, and the decay / write gates) and the order of its value heads.
//   DeltaNet, per layer on h = rms_norm(x, attn_norm): qkv (q | k | v: ssm.group_count key heads of
//   ssm.state_size, then ssm.time_step_rank value heads), z, alpha and beta from the projections;
//   c = silu(causal_conv1d(qkv, ssm_conv1d)) with a per-sequence conv state; g = softplus(alpha +
//   ssm_dt.bias) * ssm_a (the file stores ssm_a = -exp(A_log)); beta = sigmoid(beta); o =
//   gated_delta_rule(q, k, v of c, g, beta) over a per-sequence state (q, k L2-normed with the RMS
//   epsilon, q scaled by 1/sqrt(head size)); o = rms_norm per value head (ssm_norm) * silu(z); out =
//   o ssm_out.
//   Value heads `tiled` (qwen35: llama.cpp's converter reorders them) read key head j % key heads, as
//   the op does; `grouped` (qwen3next, as Hugging Face stores them) read key head j / (value heads /
//   key heads): q and k are then repeated per group with copy_columns so the op sees one key head per
//   value head.
//   Attention: attn_q gives per head its query then its output gate; per-head Q/K RMSNorms, NEOX RoPE
//   over rope.dimension_count dims; out = (attention(q) * sigmoid(gate)) attn_output.
//   x += out; x += ffn(rms_norm(x, post_attention_norm)), dense SwiGLU or routed experts plus a
//   sigmoid-gated shared expert.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/arch/arch.h"

namespace pagoda::model {

class GraphEmitter;
class TensorBinder;

struct DeltaShape {
    int64_t kernel = 0, k_heads = 0, v_heads = 0, head = 0;
    int64_t key_dim() const { return k_heads * head; }
    int64_t value_dim() const { return v_heads * head; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    int64_t group() const { return v_heads / k_heads; }  // value heads per key head
};

// The {arch}.ssm.* keys, checked (value heads a multiple of key heads, value heads of the key size).
DeltaShape read_delta_shape(const gguf::File& f, const std::string& arch_prefix);

// Per layer: whether it is a DeltaNet (recurrent) layer: {arch}.attention.recurrent_layers, else every
// layer but each full_attention_interval-th (default 4).
std::vector<bool> recurrent_layers(const gguf::File& f, const std::string& arch_prefix, int64_t n_layers);

// A DeltaNet layer's projected inputs (T rows each): qkv (conv_dim), z (value_dim), alpha and beta
// (v_heads), every value-head quantity in the architecture's value head order.
struct DeltaInputs {
    int qkv = -1, z = -1, alpha = -1, beta = -1;
};
using DeltaProjector = std::function<DeltaInputs(GraphEmitter& e, TensorBinder& bind, int32_t layer, int h)>;

enum class ValueHeads { tiled, grouped };

struct HybridSpec {
    bool moe = false;
    ValueHeads value_heads = ValueHeads::tiled;
    DeltaProjector project;
};

// The hybrid decoder of `spec` (checks the backend has the DeltaNet ops; at least one attention layer).
BuiltModel build_gated_delta_hybrid(const gguf::File& file, const ModelConfig& c, backend::Backend& b,
                                    const HybridSpec& spec);

}  // namespace pagoda::model
