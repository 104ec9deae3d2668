// phi3 (Phi-3, Phi-3.5, Phi-4 mini): the llama graph with Q|K|V in one tensor (blk.N.attn_qkv,
// rows Q then K then V) and gate|up in one (blk.N.ffn_up, rows gate then up), NEOX RoPE and
// LongRoPE: rope_factors_short.weight / rope_factors_long.weight divide the RoPE frequencies. As in
// llama.cpp the factors are chosen once per load from the context the model runs at — long when it
// exceeds phi3.rope.scaling.original_context_length, else short — so cached keys never change
// meaning mid-sequence. The attention factor (phi3.rope.scaling.attn_factor, else the published
// sqrt(1 + ln(context / original) / ln(original)) for a longer trained context) multiplies the rotated
// q and k, i.e. the scores by its square. phi3.attention.sliding_window > 0 makes every layer slide
// (Phi-3-mini-4k's 2047), as the Hugging Face model does.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/phi3_rope.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/sliding_window.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

BuiltModel build_phi3(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);

    const LongRope long_rope = read_long_rope(file, c);
    std::vector<float> factors;
    if (!long_rope.factors_tensor.empty()) factors = bind.floats(long_rope.factors_tensor, c.rope_dims / 2);
    for (float v : factors)
        if (!(v > 0)) fail("{}: {} holds a non-positive factor {}", file.name(), long_rope.factors_tensor, v);
    if (long_rope.attn_factor != 1.0 && c.rope_dims != c.head_dim)
        fail("{}: a LongRoPE attention factor with partial rotation ({} of {} dimensions) is not supported",
             file.name(), c.rope_dims, c.head_dim);
    const auto& rope = bind.rope(make_rope_spec(c.rope_dims, true, c.rope_theta, c.rope_linear_scale, factors));
    const bool f32_weights = file.find_tensor("blk.0.attn_qkv.weight")
                                 ? file.find_tensor("blk.0.attn_qkv.weight")->type == gguf::GgmlType::F32
                                 : file.find_tensor("blk.0.attn_q.weight") &&
                                       file.find_tensor("blk.0.attn_q.weight")->type == gguf::GgmlType::F32;
    m.kv_dtype = f32_weights ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const std::vector<int32_t> windows =
        layer_windows(file, "phi3", c.n_layers, file.get_int_or("phi3.attention.sliding_window", 0), 0);
    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    const float scale = float(long_rope.attn_factor * long_rope.attn_factor / std::sqrt(double(c.head_dim)));
    int x = e.embed(head.embedding, "x");
    int residual = -1;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& qkv = bind.has(p + "attn_qkv.weight")
                              ? bind.split_matrix(p + "attn_qkv.weight", c.dim, {{"q", c.q_dim()}, {"k", c.kv_dim()}, {"v", c.kv_dim()}})
                              : bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                             {p + "attn_k.weight", c.dim, c.kv_dim()},
                                             {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const auto& ffn_norm = bind.vector(p + "ffn_norm.weight", c.dim);
        const auto& gate_up = bind.split_matrix(p + "ffn_up.weight", c.dim, {{"gate", c.layer_ffn_dim(l)}, {"up", c.layer_ffn_dim(l)}});
        const auto& down = bind.matrix({{p + "ffn_down.weight", c.layer_ffn_dim(l), c.dim}});

        if (residual >= 0) e.add(x, residual);
        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto q_k_v = e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        e.rope(q_k_v[0], rope, heads, hd);
        e.rope(q_k_v[1], rope, kv_heads, hd);
        e.kv_write(l, q_k_v[1], q_k_v[2]);
        const backend::AttentionParams attention{.n_heads = heads, .scale = scale, .sliding_window = windows[size_t(i)]};
        const int a = e.attention(l, q_k_v[0], attention, hd, p + "attn");
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add(x, o);
        const int f = e.rms_norm(x, ffn_norm, c.rms_eps, p + "ffn_in");
        const auto g_u = e.matmul(gate_up, f, {p + "gate", p + "up"}, l, MatmulInput::ffn);
        const int act = e.silu_mul(g_u[0], g_u[1], p + "ffn_act");
        residual = e.matmul(down, act, {p + "ffn_out"}, l, MatmulInput::ffn_down)[0];
    }
    e.add(x, residual);
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

}  // namespace pagoda::model
