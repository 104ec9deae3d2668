// qwen35 / qwen35moe (llama.cpp's LLM_ARCH_QWEN35 / QWEN35MOE: Qwen3.5, Qwen3.6): a hybrid of gated
// DeltaNet (linear attention) layers and full attention layers, each followed by a SwiGLU FFN (qwen35)
// or routed experts plus a sigmoid-gated shared expert (qwen35moe). Layer i is a full attention
// layer when {arch}.attention.recurrent_layers says it is not recurrent, or, without that key, when
// (i + 1) % {arch}.full_attention_interval == 0 (default 4). The layers are gated_delta_net.h's (shared
// with qwen3next); this file binds qwen35's projections. Per layer, h = rms_norm(x, attn_norm):
//   DeltaNet: qkv = h attn_qkv (q | k | v: ssm.group_count key heads of ssm.state_size, then the
//     value heads, ssm.time_step_rank of them); z = h attn_gate; c = silu(causal_conv1d(qkv,
//     ssm_conv1d)) with a per-sequence conv state; g = softplus(h ssm_alpha + ssm_dt.bias) * ssm_a
//     (the file stores ssm_a = -exp(A_log)); beta = sigmoid(h ssm_beta); o = gated_delta_rule(q, k,
//     v of c, g, beta) over a per-sequence state (q, k L2-normed with the RMS epsilon, q scaled by
//     1/sqrt(head size), value head j reading key head j % key heads); o = rms_norm per value head
//     (ssm_norm) * silu(z); out = o ssm_out.
//   Attention: attn_q gives per head its query then its output gate; Q and K get their per-head
//     RMSNorms, NEOX RoPE over rope.dimension_count dims (text positions: every M-RoPE section
//     rotates by the token's position, so the sections change nothing); out = (attention(q) *
//     sigmoid(gate)) attn_output.
//   x += out; x += ffn(rms_norm(x, post_attention_norm)).
// Only the attention layers have KV (BuiltModel::kv_layers); the DeltaNet layers' states are
// Rows::state tensors the model keeps per sequence slot (StepModelInfo::n_state_slots). Trailing
// NextN blocks are stored and not run (read_config drops them with a log line).
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/arch.h"
#include "model/arch/gated_delta_net.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {
namespace {

// qwen35's DeltaNet input projections: attn_qkv, attn_gate, ssm_alpha and ssm_beta, value heads tiled.
HybridSpec qwen35_spec(const gguf::File& file, const ModelConfig& c, bool moe) {
    const DeltaShape d = read_delta_shape(file, c.arch + ".");
    return {.moe = moe, .value_heads = ValueHeads::tiled,
            .project = [d, dim = c.dim](GraphEmitter& e, TensorBinder& bind, int32_t l, int h) {
                const std::string p = fmt::format("blk.{}.", l);
                const auto& qkv_w = bind.matrix({{p + "attn_qkv.weight", dim, d.conv_dim()}});
                const auto& z_w = bind.matrix({{p + "attn_gate.weight", dim, d.value_dim()}});
                const auto& alpha_w = bind.matrix({{p + "ssm_alpha.weight", dim, d.v_heads}});
                const auto& beta_w = bind.matrix({{p + "ssm_beta.weight", dim, d.v_heads}});
                return DeltaInputs{.qkv = e.matmul(qkv_w, h, {p + "qkv"}, l, MatmulInput::attention)[0],
                                   .z = e.matmul(z_w, h, {p + "z"}, l, MatmulInput::attention)[0],
                                   .alpha = e.matmul(alpha_w, h, {p + "alpha"}, l, MatmulInput::attention)[0],
                                   .beta = e.matmul(beta_w, h, {p + "beta"}, l, MatmulInput::attention)[0]};
            }};
}

}  // namespace

BuiltModel build_qwen35(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    if (config.n_experts > 0) fail("{}: qwen35 has dense FFNs; a file with experts is qwen35moe", file.name());
    return build_gated_delta_hybrid(file, config, backend, qwen35_spec(file, config, false));
}

BuiltModel build_qwen35moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_gated_delta_hybrid(file, config, backend, qwen35_spec(file, config, true));
}

}  // namespace pagoda::model
