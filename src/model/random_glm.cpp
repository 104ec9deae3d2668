// gen-model's `glm4moe` and `glm4` writers (random_model.h): the metadata keys llama.cpp's converter
// (Glm4MoeModel, Glm4Model) writes and its tensors by llama.cpp's names. Both: Q/K/V with biases,
// half of each head rotated (rope.dimension_count = head_dim / 2, the converter's default
// partial_rotary_factor). glm4moe: optional per-head Q/K norms, the FFN's input norm as
// post_attention_norm, leading dense layers, then a router with its score-correction bias
// exp_probs_b, stacked experts and the shared experts (expert_shared_count of the expert width),
// and trailing NextN blocks with their extra tensors (eh_proj, enorm, hnorm, shared_head_norm).
// glm4 (GLM-4-0414): sandwich norms (post_attention_norm after the attention, ffn_norm before the FFN,
// post_ffw_norm after it) and gate|up fused in ffn_up [dim, 2 ffn].
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_model.h"
#include "model/random_tensors.h"

namespace pagoda::model {

using gguf::GgmlType;
using gguf::Value;
using random_detail::constant_f32;
using random_detail::random_tensor;
using random_detail::Rng;
using random_detail::LayerManifest;
using random_detail::TensorAdder;

int64_t build_random_glm(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    const LayerManifest m(s.arch);
    const bool moe = random_detail::check_dense_or_experts(s, m);
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty() || s.shared_expert_ffn_dim > 0)
        fail("gen-model: {} takes no --rope-scaling, rank head or --shared-expert-ffn-dim (its shared experts are "
             "--shared-experts of the expert width)", s.arch);
    if (s.qk_norm && !m.has("attn_q_norm.weight")) fail("gen-model: {} has no Q/K norms (--qk-norm)", s.arch);
    if (s.nextn_layers > 0 && !m.has("nextn.eh_proj.weight")) fail("gen-model: {} has no NextN blocks (--nextn-layers)", s.arch);
    const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    const int64_t rope = hd / 2 / 2 * 2;
    if (rope < 2) fail("gen-model: the head size {} is too small to rotate half of it", hd);
    if (s.leading_dense < 0 || s.leading_dense > s.n_layers)
        fail("gen-model: {} leading dense layers of {} is out of range", s.leading_dense, s.n_layers);
    if (s.nextn_layers < 0 || s.nextn_layers > 4) fail("gen-model: {} NextN layers is out of range (0..4)", s.nextn_layers);
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const int64_t fs = m.has("ffn_gate_shexp.weight") ? f * s.n_shared_experts : 0;
    const int64_t blocks = s.n_layers + s.nextn_layers;
    // The layer's form from the manifest: the converter writes the Q/K/V biases wherever the
    // architecture has them; glm4's dense FFN is the sandwich-normed fused gate|up one, glm4moe's
    // leading dense layers a plain SwiGLU after post_attention_norm.
    const bool qkv_bias = m.has("attn_q.bias"), ffn_norm = m.has("ffn_norm.weight");
    const bool fused_gate_up = !m.has("ffn_gate.weight"), post_ffw = m.required("post_ffw_norm.weight");
    const bool selection_bias = m.has("exp_probs_b.bias");

    const std::string a = s.arch + ".";
    random_detail::write_decoder_header(s, {.arch = s.arch, .blocks = blocks, .ffn_dim = s.ffn_dim,
                                                  .kv_heads = s.n_kv_heads, .rms_eps = 1e-5f}, w);
    w.set(a + "attention.key_length", Value::u32(uint32_t(hd)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(hd)));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(rope)));
    if (moe) {
        random_detail::write_expert_keys(s, f, w);
        w.set(a + "expert_shared_count", Value::u32(uint32_t(s.n_shared_experts)));
        w.set(a + "leading_dense_block_count", Value::u32(uint32_t(s.leading_dense)));
        w.set(a + "expert_gating_func", Value::u32(uint32_t(m.d.gating)));  // the converter always writes it
        w.set(a + "expert_weights_scale", Value::f32(s.expert_weights_scale));
        w.set(a + "expert_weights_norm", Value::boolean(s.expert_weights_norm));
        if (s.nextn_layers > 0) w.set(a + "nextn_predict_layers", Value::u32(uint32_t(s.nextn_layers)));
    }
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens);

    Rng rng(s.seed);
    const int64_t q_dim = s.n_heads * hd, kv_dim = s.n_kv_heads * hd;
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);

    add.matrix("token_embd.weight", s.dim, vocab_size, 1.0f);
    add.f32("output_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    for (int64_t l = 0; l < blocks; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.norm(p + "attn_norm.weight", s.dim);
        add.matrix(p + "attn_q.weight", s.dim, q_dim, 1.0f / std::sqrt(float(s.dim)));
        add.matrix(p + "attn_k.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        add.matrix(p + "attn_v.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        if (qkv_bias) {
            add.f32(p + "attn_q.bias", {q_dim}, random_tensor(rng, q_dim, 0.1f, GgmlType::F32));
            add.f32(p + "attn_k.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
            add.f32(p + "attn_v.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        }
        if (s.qk_norm) {
            add.norm(p + "attn_q_norm.weight", hd);
            add.norm(p + "attn_k_norm.weight", hd);
        }
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        add.norm(p + "post_attention_norm.weight", s.dim);
        if (!moe || l < s.leading_dense) {
            if (ffn_norm) add.norm(p + "ffn_norm.weight", s.dim);
            if (fused_gate_up) {
                add.matrix(p + "ffn_up.weight", s.dim, 2 * s.ffn_dim, 1.0f / std::sqrt(float(s.dim)));
                add.matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, out_scale / std::sqrt(float(s.ffn_dim)));
            } else {
                add.swiglu(p, "", s.dim, s.ffn_dim, out_scale);
            }
            if (post_ffw) add.norm(p + "post_ffw_norm.weight", s.dim);
        } else {
            add.router(p, s.dim, s.n_experts);
            if (selection_bias)
                add.f32(p + "exp_probs_b.bias", {s.n_experts}, random_tensor(rng, s.n_experts, 0.3f, GgmlType::F32));
            add.swiglu_experts(p, s.dim, f, s.n_experts, out_scale);
            if (fs > 0) add.swiglu(p, "_shexp", s.dim, fs, out_scale);
        }
        if (l >= s.n_layers) add.nextn(p, s.dim);  // loaded and skipped, as llama.cpp does
    }
    return add.params();
}

}  // namespace pagoda::model
