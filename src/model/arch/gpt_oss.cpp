// gpt-oss (OpenAI's gpt-oss-20b / -120b; llama.cpp's LLM_ARCH_OPENAI_MOE, GGUF arch "gpt-oss"). Per
// layer, with llama.cpp's tensor names:
//   h = rms_norm(x, attn_norm) ; q, k, v = h W_{q,k,v} + b ; rope(q, k) ; kv_write(k, v)
//   a = attention(q) with a per-head sink (attn_sinks.weight) and, on even layers, a sliding window
//   x += a W_o + b_o ; f = rms_norm(x, post_attention_norm) ; x += moe(f)
// RoPE is NEOX with YaRN (gpt-oss.rope.scaling.*: factor 32 over an original 4096 context); YaRN's
// mscale multiplies the rotated q and k, so it enters the attention scale squared, beside
// 1 / sqrt(rope dims) (llama.cpp's kq scale). Layers alternate sliding (window
// gpt-oss.attention.sliding_window) and global, starting with a sliding one (llama.cpp's swa pattern 2;
// a sliding_window_pattern key overrides it). The MoE FFN: a biased router, the softmax of the
// k selected logits (not renormalised), biased experts with the clamped SwiGLU (moe_ffn.h).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/moe_ffn.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/sliding_window.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {

BuiltModel build_gpt_oss(const gguf::File& file, const ModelConfig& c, backend::Backend& b) {
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    if (c.rope_scaling != "yarn")
        fail("{}: gpt-oss.rope.scaling.type is '{}', expected yarn (gpt-oss is trained with YaRN)", file.name(), c.rope_scaling);
    const YarnRopeScaling yarn = read_yarn_rope_scaling(file, c.arch, c.context_length);
    const auto& rope = bind.rope(yarn_rope_spec(c.rope_dims, true, c.rope_theta, yarn));
    const double mscale = yarn_mscale(yarn);
    const float scale = float(mscale * mscale / std::sqrt(double(c.rope_dims)));
    m.kv_dtype = file.find_tensor("blk.0.attn_q.weight") && file.find_tensor("blk.0.attn_q.weight")->type == gguf::GgmlType::F32
                     ? kv::KvDtype::f32 : kv::KvDtype::f16;
    const std::string window_key = c.arch + ".attention.sliding_window";
    if (!file.has(window_key)) fail("{}: key {} is missing", file.name(), window_key);
    const int64_t window = file.get_int(window_key);
    if (window <= 0) fail("{}: {} = {} must be positive", file.name(), window_key, window);
    const std::vector<int32_t> windows = layer_windows(file, c.arch, c.n_layers, window, 2);

    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    int x = e.embed(head.embedding, "x");
    int residual = -1;
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& qkv = bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                       {p + "attn_k.weight", c.dim, c.kv_dim()},
                                       {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const auto& sinks = bind.vector(p + "attn_sinks.weight", c.n_heads);
        const auto& post_norm = bind.vector(p + "post_attention_norm.weight", c.dim);

        if (residual >= 0) e.add(x, residual);
        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto q_k_v = e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        e.add_bias(q_k_v[0], bind.vector(p + "attn_q.bias", c.q_dim()));
        e.add_bias(q_k_v[1], bind.vector(p + "attn_k.bias", c.kv_dim()));
        e.add_bias(q_k_v[2], bind.vector(p + "attn_v.bias", c.kv_dim()));
        e.rope(q_k_v[0], rope, heads, hd);
        e.rope(q_k_v[1], rope, kv_heads, hd);
        e.kv_write(l, q_k_v[1], q_k_v[2]);
        const backend::AttentionParams attention{
            .n_heads = heads, .scale = scale, .sliding_window = windows[size_t(i)], .sinks = &sinks};
        if (!b.supports_attention(attention))
            fail("{}: {} backend: attention sinks not supported yet (gpt-oss layer {})", file.name(), b.name(), i);
        const int a = e.attention(l, q_k_v[0], attention, hd, p + "attn");
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add_bias(o, bind.vector(p + "attn_output.bias", c.dim));
        e.add(x, o);
        const int f = e.rms_norm(x, post_norm, c.rms_eps, p + "ffn_in");
        residual = emit_moe_ffn(e, bind, file, c, b, m, i, f, {.activation = backend::MoeActivation::swiglu_oai});
    }
    e.add(x, residual);
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

}  // namespace pagoda::model
