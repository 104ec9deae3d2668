// llama: Llama 1-3, Mistral, TinyLlama, the stories models; qwen2 is the same graph with Q/K/V
// biases and NEOX RoPE (qwen2.cpp). Per layer:
//   h = rms_norm(x) ; q, k, v = h W_qkv (+ b) ; rope(q, k) ; kv_write(k, v) ; a = attention(q)
//   x += a W_o ; h = rms_norm(x) ; x += (silu(h W_gate) * (h W_up)) W_down
// and the rows that want logits get the final norm and the output head (tied to the embedding
// when output.weight is absent); the rows that want their hidden state (embeddings) get the final
// norm only. RoPE frequencies carry llama 3's factors: rope_freqs.weight, or computed from
// llama.rope.scaling.* when the type is "llama3" and the tensor is absent.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/graph_emitter.h"
#include "model/arch/model_head.h"
#include "model/arch/llama_family.h"
#include "model/arch/moe_ffn.h"
#include "model/arch/rope_frequencies.h"
#include "model/arch/tensor_binder.h"

namespace pagoda::model {
BuiltModel build_llama_family(const gguf::File& file, const ModelConfig& c, backend::Backend& b,
                              const LlamaVariant& variant) {
    BuiltModel m;
    TensorBinder bind(file, b, m);
    GraphEmitter e(m.graph);
    const ModelHead head = bind_model_head(bind, c);
    std::vector<float> freq_factors;
    if (bind.has("rope_freqs.weight")) {  // llama3-style per-frequency divisors
        freq_factors = bind.floats("rope_freqs.weight", c.rope_dims / 2);
        for (float v : freq_factors)
            if (!(v > 0)) fail("{}: rope_freqs.weight holds a non-positive factor {}", file.name(), v);
    }
    if (freq_factors.empty() && c.rope_scaling == "llama3")  // the parameters instead of the tensor
        freq_factors = llama3_rope_factors(read_llama3_rope_scaling(file, c.arch), c.rope_theta, c.rope_dims);
    if (c.rope_scaling == "yarn" && (!variant.yarn_unscaled || !freq_factors.empty()))
        fail("{}: {} YaRN {}", file.name(), c.arch,
             variant.yarn_unscaled ? "with rope_freqs.weight factors is not supported" : "is not supported by this builder");
    backend::RopeSpec rope_spec =
        c.rope_scaling == "yarn"
            ? yarn_rope_spec(c.rope_dims, c.rope_style == RopeStyle::neox, c.rope_theta,
                             read_yarn_rope_scaling(file, c.arch, c.context_length, true))
            : make_rope_spec(c.rope_dims, c.rope_style == RopeStyle::neox, c.rope_theta, c.rope_linear_scale, freq_factors);
    rope_spec.pair_axis = variant.rope_pair_axis;
    const auto& rope = bind.rope(std::move(rope_spec));
    m.kv_dtype = file.find_tensor("blk.0.attn_q.weight") && file.find_tensor("blk.0.attn_q.weight")->type == gguf::GgmlType::F32
                     ? kv::KvDtype::f32 : kv::KvDtype::f16;

    const auto heads = int32_t(c.n_heads), kv_heads = int32_t(c.n_kv_heads), hd = int32_t(c.head_dim);
    const backend::AttentionParams attention{.n_heads = heads, .scale = 1.0f / std::sqrt(float(c.head_dim))};
    int x = e.embed(head.embedding, "x");
    const int32_t slices = 1 + variant.deepstack_layers;
    if (variant.image_input) e.input_embeddings(x, 0, slices, -1);
    int residual = -1;  // the previous FFN's output, added to x before the next norm
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const auto l = int32_t(i);
        const std::string p = fmt::format("blk.{}.", i);
        if (residual >= 0 && i <= variant.deepstack_layers) {  // layer i - 1's output gets deep-stack slice i
            e.add(x, residual);
            residual = -1;
            e.input_embeddings(x, l, slices, l - 1);
        }
        const auto& attn_norm = bind.vector(p + "attn_norm.weight", c.dim);
        const auto& qkv = bind.matrix({{p + "attn_q.weight", c.dim, c.q_dim()},
                                       {p + "attn_k.weight", c.dim, c.kv_dim()},
                                       {p + "attn_v.weight", c.dim, c.kv_dim()}});
        const auto& wo = bind.matrix({{p + "attn_output.weight", c.q_dim(), c.dim}});
        const auto& ffn_norm = bind.vector(p + variant.ffn_norm + ".weight", c.dim);

        if (residual >= 0) e.add(x, residual);
        const int h = e.rms_norm(x, attn_norm, c.rms_eps, p + "attn_in");
        const auto q_k_v = e.matmul(qkv, h, {p + "q", p + "k", p + "v"}, l, MatmulInput::attention);
        if (variant.qkv_bias || (variant.optional_qkv_bias && bind.has(p + "attn_q.bias"))) {
            e.add_bias(q_k_v[0], bind.vector(p + "attn_q.bias", c.q_dim()));
            e.add_bias(q_k_v[1], bind.vector(p + "attn_k.bias", c.kv_dim()));
            e.add_bias(q_k_v[2], bind.vector(p + "attn_v.bias", c.kv_dim()));
        }
        if (variant.qk_norm_whole_row) {  // one head of the whole width: the RMS spans every head
            e.rms_norm_heads(q_k_v[0], bind.vector(p + "attn_q_norm.weight", c.q_dim()), c.rms_eps, 1);
            e.rms_norm_heads(q_k_v[1], bind.vector(p + "attn_k_norm.weight", c.kv_dim()), c.rms_eps, 1);
        } else if (variant.qk_norm || (variant.optional_qk_norm && bind.has(p + "attn_q_norm.weight"))) {
            e.rms_norm_heads(q_k_v[0], bind.vector(p + "attn_q_norm.weight", c.head_dim), c.rms_eps, heads);
            e.rms_norm_heads(q_k_v[1], bind.vector(p + "attn_k_norm.weight", c.head_dim), c.rms_eps, kv_heads);
        }
        if (variant.no_rope_period <= 0 || (i + 1) % variant.no_rope_period != 0) {
            e.rope(q_k_v[0], rope, heads, hd);
            e.rope(q_k_v[1], rope, kv_heads, hd);
        }
        e.kv_write(l, q_k_v[1], q_k_v[2]);
        if (variant.attn_temperature.beta != 0) e.attn_temperature(q_k_v[0], variant.attn_temperature, l);
        const int a = e.attention(l, q_k_v[0], attention, hd, p + "attn");
        const int o = e.matmul(wo, a, {p + "attn_out"}, l, MatmulInput::attention_output)[0];
        e.add(x, o);
        const int f = e.rms_norm(x, ffn_norm, c.rms_eps, p + "ffn_in");
        if (c.n_experts > 0 && i >= c.leading_dense_layers) {
            residual = emit_moe_ffn(e, bind, file, c, b, m, i, f,
                                    {.shared_expert = variant.shared_expert, .shared_gate = variant.shared_gate});
            continue;
        }
        residual = emit_swiglu_ffn(e, bind, c, l, f);
    }
    e.add(x, residual);
    emit_model_head(e, m, head, x, c.rms_eps);
    return m;
}

BuiltModel build_llama(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.qkv_bias = false});
}

}  // namespace pagoda::model
