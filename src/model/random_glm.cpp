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
using random_detail::TensorAdder;

int64_t build_random_glm(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    const bool moe = random_detail::check_dense_or_experts(s, "glm4", "glm4moe");
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty() || s.shared_expert_ffn_dim > 0)
        fail("gen-model: {} takes no --rope-scaling, rank head or --shared-expert-ffn-dim (its shared experts are "
             "--shared-experts of the expert width)", s.arch);
    if (!moe && (s.qk_norm || s.nextn_layers > 0)) fail("gen-model: --qk-norm and --nextn-layers are for glm4moe");
    const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    const int64_t rope = hd / 2 / 2 * 2;
    if (rope < 2) fail("gen-model: the head size {} is too small to rotate half of it", hd);
    if (s.leading_dense < 0 || s.leading_dense > s.n_layers)
        fail("gen-model: {} leading dense layers of {} is out of range", s.leading_dense, s.n_layers);
    if (s.nextn_layers < 0 || s.nextn_layers > 4) fail("gen-model: {} NextN layers is out of range (0..4)", s.nextn_layers);
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const int64_t fs = f * s.n_shared_experts;
    const int64_t blocks = s.n_layers + (moe ? s.nextn_layers : 0);

    const std::string a = s.arch + ".";
    random_detail::write_decoder_header(s, {.arch = s.arch, .blocks = blocks, .ffn_dim = s.ffn_dim,
                                                  .kv_heads = s.n_kv_heads, .rms_eps = 1e-5f}, w);
    w.set(a + "attention.key_length", Value::u32(uint32_t(hd)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(hd)));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(rope)));
    if (moe) {
        w.set(a + "expert_count", Value::u32(uint32_t(s.n_experts)));
        w.set(a + "expert_used_count", Value::u32(uint32_t(s.n_experts_used)));
        w.set(a + "expert_feed_forward_length", Value::u32(uint32_t(f)));
        w.set(a + "expert_shared_count", Value::u32(uint32_t(s.n_shared_experts)));
        w.set(a + "leading_dense_block_count", Value::u32(uint32_t(s.leading_dense)));
        w.set(a + "expert_gating_func", Value::u32(2));  // the converter always writes sigmoid
        w.set(a + "expert_weights_scale", Value::f32(s.expert_weights_scale));
        w.set(a + "expert_weights_norm", Value::boolean(s.expert_weights_norm));
        if (s.nextn_layers > 0) w.set(a + "nextn_predict_layers", Value::u32(uint32_t(s.nextn_layers)));
    }
    w.set("general.file_type", Value::u32(s.type == GgmlType::F32 ? 0 : s.type == GgmlType::F16 ? 1 : 32));

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
        add.f32(p + "attn_q.bias", {q_dim}, random_tensor(rng, q_dim, 0.1f, GgmlType::F32));
        add.f32(p + "attn_k.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        add.f32(p + "attn_v.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        if (s.qk_norm) {
            add.norm(p + "attn_q_norm.weight", hd);
            add.norm(p + "attn_k_norm.weight", hd);
        }
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        add.norm(p + "post_attention_norm.weight", s.dim);
        if (!moe) {  // glm4: the sandwich norms around a fused gate|up FFN
            add.norm(p + "ffn_norm.weight", s.dim);
            add.matrix(p + "ffn_up.weight", s.dim, 2 * s.ffn_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, out_scale / std::sqrt(float(s.ffn_dim)));
            add.norm(p + "post_ffw_norm.weight", s.dim);
            continue;
        }
        if (l < s.leading_dense) {
            add.matrix(p + "ffn_gate.weight", s.dim, s.ffn_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "ffn_up.weight", s.dim, s.ffn_dim, 1.0f / std::sqrt(float(s.dim)));
            add.matrix(p + "ffn_down.weight", s.ffn_dim, s.dim, out_scale / std::sqrt(float(s.ffn_dim)));
        } else {
            // The router stays F32 (as the converter keeps it), scaled up so each top-k has clear margins.
            add.f32(p + "ffn_gate_inp.weight", {s.dim, s.n_experts},
                    random_tensor(rng, s.dim * s.n_experts, 2.0f / std::sqrt(float(s.dim)), GgmlType::F32));
            add.f32(p + "exp_probs_b.bias", {s.n_experts}, random_tensor(rng, s.n_experts, 0.3f, GgmlType::F32));
            add.experts(p + "ffn_gate_exps.weight", s.dim, f, s.n_experts, 1.0f / std::sqrt(float(s.dim)));
            add.experts(p + "ffn_up_exps.weight", s.dim, f, s.n_experts, 1.0f / std::sqrt(float(s.dim)));
            add.experts(p + "ffn_down_exps.weight", f, s.dim, s.n_experts, out_scale / std::sqrt(float(f)));
            if (fs > 0) {
                add.matrix(p + "ffn_gate_shexp.weight", s.dim, fs, 1.0f / std::sqrt(float(s.dim)));
                add.matrix(p + "ffn_up_shexp.weight", s.dim, fs, 1.0f / std::sqrt(float(s.dim)));
                add.matrix(p + "ffn_down_shexp.weight", fs, s.dim, out_scale / std::sqrt(float(fs)));
            }
        }
        if (l >= s.n_layers) {  // a NextN block's own tensors (llama.cpp loads and skips them)
            add.matrix(p + "nextn.eh_proj.weight", 2 * s.dim, s.dim, 1.0f / std::sqrt(float(2 * s.dim)));
            add.norm(p + "nextn.enorm.weight", s.dim);
            add.norm(p + "nextn.hnorm.weight", s.dim);
            add.norm(p + "nextn.shared_head_norm.weight", s.dim);
        }
    }
    return add.params();
}

}  // namespace pagoda::model
