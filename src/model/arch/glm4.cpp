// glm4 (llama.cpp's LLM_ARCH_GLM4: GLM-4-0414 9B / 32B, GLM-Z1): the llama attention (Q/K/V biases
// where the file has them, normal adjacent-pair RoPE over the leading rope.dimension_count dims of
// each head: half of it) inside sandwich norms, and a SwiGLU FFN whose gate and up come fused in
// ffn_up [dim, 2 ffn] (gate rows first). Per layer:
//   h = rms_norm(x, attn_norm) ; q, k, v = h W_qkv (+ b) ; rope(q, k) ; a = attention(q)
//   x += rms_norm(a W_o, post_attention_norm)
//   f = rms_norm(x, ffn_norm) ; x += rms_norm((silu(f W_gate) * (f W_up)) W_down, post_ffw_norm)
// Older files with a fused attn_qkv load too; a fused attn_qkv.bias is refused by name.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

BuiltModel build_glm4(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    const auto& rope = bind.rope(make_rope_spec(c.rope_dims, false, c.rope_theta, c.rope_linear_scale, {}));
    const auto* q_info = file.find_tensor("blk.0.attn_q.weight") ? file.find_tensor("blk.0.attn_q.weight")
                                                                 : file.find_tensor("blk.0.attn_qkv.weight");
    m.kv_dtype = q_info && q_info->type == gguf::GgmlType::F32 ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    const backend::AttentionParams attention{.n_heads = heads, .scale = 1.0f / std::sqrt(float(c.head_dim))};
    int x = e.embed(head.embedding, "x");
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const bool fused_qkv = bind.has(p + "attn_qkv.weight");
        if (fused_qkv && bind.has(p + "attn_qkv.bias"))
            fail("{}: tensor {}attn_qkv.bias (a fused Q/K/V bias) is not supported by pagoda's glm4 builder", file.name(), p);
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& qkv = fused_qkv ? bind.split_matrix(p + "attn_qkv.weight", c.dim,
                                                        {{"q", c.q_dim()}, {"k", c.kv_dim()}, {"v", c.kv_dim()}})
                                    : bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                                   {p + "attn_k.weight", c.dim, c.kv_dim()},
                                                   {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const auto& post_attn_norm = bind.vector(p + "post_attention_norm.weight", c.dim);
        const auto& ffn_norm = bind.vector(p + "ffn_norm.weight", c.dim);
        const auto& gate_up = bind.split_matrix(p + "ffn_up.weight", c.dim, {{"gate", c.layer_ffn_dim(l)}, {"up", c.layer_ffn_dim(l)}});
        const auto& down = bind.matrix({{p + "ffn_down.weight", c.layer_ffn_dim(l), c.dim}});
        const auto& post_ffw_norm = bind.vector(p + "post_ffw_norm.weight", c.dim);

        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto q_k_v = e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        if (!fused_qkv && bind.has(p + "attn_q.bias")) {
            e.add_bias(q_k_v[0], bind.vector(p + "attn_q.bias", c.q_dim()));
            e.add_bias(q_k_v[1], bind.vector(p + "attn_k.bias", c.kv_dim()));
            e.add_bias(q_k_v[2], bind.vector(p + "attn_v.bias", c.kv_dim()));
        }
        e.rope(q_k_v[0], rope, heads, hd);
        e.rope(q_k_v[1], rope, kv_heads, hd);
        e.kv_write(l, q_k_v[1], q_k_v[2]);
        const int a = e.attention(l, q_k_v[0], attention, hd, p + "attn");
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add(x, e.rms_norm(o, post_attn_norm, c.rms_eps, p + "attn_post"));
        const int f = e.rms_norm(x, ffn_norm, c.rms_eps, p + "ffn_in");
        const auto g_u = e.matmul(gate_up, f, {p + "gate", p + "up"}, l, MatmulInput::ffn);
        const int act = e.silu_mul(g_u[0], g_u[1], p + "ffn_act");
        const int d = e.matmul(down, act, {p + "ffn_out"}, l, MatmulInput::ffn_down)[0];
        e.add(x, e.rms_norm(d, post_ffw_norm, c.rms_eps, p + "ffn_post"));
    }
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

}  // namespace pagoda::model
