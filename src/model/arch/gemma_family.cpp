#include "model/arch/gemma_family.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

float gemma_query_scale(const ModelConfig& c, int64_t layers_of_27b) {
    const int64_t scalar = c.n_layers == layers_of_27b ? c.dim / c.n_heads : c.head_dim;
    return 1.0f / std::sqrt(float(scalar));
}

BuiltModel build_gemma_family(const gguf::File& file, const ModelConfig& c, backend::Backend& b,
                              const GemmaVariant& variant) {
    if (int64_t(variant.windows.size()) != c.n_layers) fail("gemma: {} layer windows for {} layers", variant.windows.size(), c.n_layers);
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    const auto& global_rope = bind.rope(make_rope_spec(c.rope_dims, true, c.rope_theta, c.rope_linear_scale, {}));
    const bool own_local = variant.local_rope_theta > 0 && (variant.local_rope_theta != c.rope_theta ||
                                                            (variant.local_rope_unscaled && c.rope_linear_scale != 1.0f));
    const auto& local_rope = own_local ? bind.rope(make_rope_spec(c.rope_dims, true, variant.local_rope_theta,
                                                                  variant.local_rope_unscaled ? 1.0 : c.rope_linear_scale, {}))
                                       : global_rope;
    m.kv_dtype = file.find_tensor("blk.0.attn_q.weight") && file.find_tensor("blk.0.attn_q.weight")->type == gguf::GgmlType::F32
                     ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    int x = e.embed(head.embedding, "x");
    // Gemma multiplies the embedding by sqrt(dim) computed in the activation type.
    e.scale(x, std::sqrt(float(c.dim)));
    // Image soft tokens replace their rows after the scale: HF's Gemma 3 scales only the token
    // embeddings (Gemma3TextScaledWordEmbedding) before scattering the image features in unscaled.
    if (variant.image_input) e.input_embeddings(x);
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const int32_t window = variant.windows[size_t(i)];
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& qkv = bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                       {p + "attn_k.weight", c.dim, c.kv_dim()},
                                       {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const auto& post_attn_norm = bind.vector(p + "post_attention_norm.weight", c.dim);
        const auto& ffn_norm = bind.vector(p + "ffn_norm.weight", c.dim);
        const auto& gate_up = bind.matrix({{p + "ffn_gate.weight", c.dim, c.layer_ffn_dim(l)}, {p + "ffn_up.weight", c.dim, c.layer_ffn_dim(l)}});
        const auto& down = bind.matrix({{p + "ffn_down.weight", c.layer_ffn_dim(l), c.dim}});
        const auto& post_ffw_norm = bind.vector(p + "post_ffw_norm.weight", c.dim);

        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto q_k_v = e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        if (variant.qk_norm) {
            e.rms_norm_heads(q_k_v[0], bind.vector(p + "attn_q_norm.weight", c.head_dim), c.rms_eps, heads);
            e.rms_norm_heads(q_k_v[1], bind.vector(p + "attn_k_norm.weight", c.head_dim), c.rms_eps, kv_heads);
        }
        const backend::Rope& rope = window > 0 ? local_rope : global_rope;
        e.rope(q_k_v[0], rope, heads, hd);
        e.rope(q_k_v[1], rope, kv_heads, hd);
        e.kv_write(l, q_k_v[1], q_k_v[2]);
        const backend::AttentionParams attention{.n_heads = heads, .scale = variant.query_scale,
                                                 .sliding_window = window, .softcap = variant.attn_softcap};
        if (!b.supports_attention(attention))
            fail("{}: the {} backend cannot run layer {}'s attention (window {}, soft cap {})", file.name(), b.name(), i,
                 window, variant.attn_softcap);
        const int a = e.attention(l, q_k_v[0], attention, hd, p + "attn");
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        const int o_normed = e.rms_norm(o, post_attn_norm, c.rms_eps, p + "attn_post");
        e.add(x, o_normed);
        const int f = e.rms_norm(x, ffn_norm, c.rms_eps, p + "ffn_in");
        const auto g_u = e.matmul(gate_up, f, {p + "gate", p + "up"}, l, MatmulInput::ffn);
        const int act = e.gelu_mul(g_u[0], g_u[1], p + "ffn_act");
        const int d = e.matmul(down, act, {p + "ffn_out"}, l, MatmulInput::ffn_down)[0];
        const int d_normed = e.rms_norm(d, post_ffw_norm, c.rms_eps, p + "ffn_post");
        e.add(x, d_normed);
    }
    emit_model_head(e, m, head, x, c.rms_eps, variant.final_softcap);
    return m;
}

}  // namespace pagoda::model
