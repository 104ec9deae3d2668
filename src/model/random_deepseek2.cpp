// gen-model's `deepseek2` writer (random_model.h): the metadata keys llama.cpp's converter
// (DeepseekV2Model) writes and its tensors by llama.cpp's names: multi-head latent attention (attn_q_a
// + attn_q_a_norm + attn_q_b, or V2-Lite's attn_q; attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b or the
// newer attn_k_b / attn_v_b split), leading dense FFN layers, then a router (with V3's correction bias
// under sigmoid scoring), stacked experts and the ungated shared experts.
#include <algorithm>
#include <cmath>
#include <cstring>
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

int64_t build_random_deepseek2(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    random_detail::check_expert_spec("deepseek2", s.n_experts, s.n_experts_used);
    if (s.n_layers <= 0 || s.dim <= 0 || s.n_heads <= 0 || s.ffn_dim <= 0) fail("gen-model: every size must be positive");
    if (!s.rope_scaling.empty() || !s.rank_head.empty() || s.shared_expert_ffn_dim > 0)
        fail("gen-model: deepseek2 takes no --rope-scaling, rank head or --shared-expert-ffn-dim (its shared experts "
             "are --shared-experts of the expert width)");
    const int64_t hk = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    const int64_t rope = s.mla_rope_dims > 0 ? s.mla_rope_dims : std::max<int64_t>(2, hk / 4 / 2 * 2);
    const int64_t nope = hk - rope;
    const int64_t v = s.v_head_dim > 0 ? s.v_head_dim : nope;
    const int64_t kvl = s.kv_lora_rank > 0 ? s.kv_lora_rank : s.dim / 2;
    const int64_t ql = s.q_lora_rank >= 0 ? s.q_lora_rank : s.dim / 2;
    if (rope % 2 || nope <= 0 || v > hk)
        fail("gen-model: deepseek2 needs an even RoPE size {} below the key head size {} and a value size {} at most it",
             rope, hk, v);
    if (s.leading_dense < 0 || s.leading_dense > s.n_layers)
        fail("gen-model: {} leading dense layers of {} is out of range", s.leading_dense, s.n_layers);
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const LayerManifest m(s.arch);
    const int64_t fs = m.has("ffn_gate_shexp.weight") ? f * s.n_shared_experts : 0;
    // V3's score-correction bias goes with sigmoid scoring (expert_gating_func 2), as its converter writes it.
    const bool selection_bias = s.expert_gating == 2 && m.has("exp_probs_b.bias");

    const std::string a = "deepseek2.";
    random_detail::write_decoder_header(s, {.arch = "deepseek2", .blocks = s.n_layers, .ffn_dim = s.ffn_dim,
                                                  .kv_heads = s.mla_split ? 1 : s.n_heads, .rms_eps = 1e-6f}, w);
    if (ql > 0) w.set(a + "attention.q_lora_rank", Value::u32(uint32_t(ql)));
    w.set(a + "attention.kv_lora_rank", Value::u32(uint32_t(kvl)));
    if (s.mla_split) {
        w.set(a + "attention.key_length", Value::u32(uint32_t(kvl + rope)));
        w.set(a + "attention.value_length", Value::u32(uint32_t(kvl)));
        w.set(a + "attention.key_length_mla", Value::u32(uint32_t(hk)));
        w.set(a + "attention.value_length_mla", Value::u32(uint32_t(v)));
    } else {
        w.set(a + "attention.key_length", Value::u32(uint32_t(hk)));
        w.set(a + "attention.value_length", Value::u32(uint32_t(v)));
    }
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(rope)));
    w.set(a + "leading_dense_block_count", Value::u32(uint32_t(s.leading_dense)));
    random_detail::write_expert_keys(s, f, w);
    w.set(a + "expert_shared_count", Value::u32(uint32_t(s.n_shared_experts)));
    w.set(a + "expert_weights_scale", Value::f32(s.expert_weights_scale));
    w.set(a + "expert_weights_norm", Value::boolean(s.expert_weights_norm));
    w.set(a + "expert_gating_func", Value::u32(uint32_t(s.expert_gating)));
    if (s.expert_groups > 0) {
        w.set(a + "expert_group_count", Value::u32(uint32_t(s.expert_groups)));
        w.set(a + "expert_group_used_count", Value::u32(uint32_t(s.expert_groups_used)));
    }
    if (s.yarn) {
        w.set(a + "rope.scaling.type", Value::string("yarn"));
        w.set(a + "rope.scaling.factor", Value::f32(40.0f));
        w.set(a + "rope.scaling.original_context_length", Value::u32(uint32_t(std::max<int64_t>(1, s.context_length / 4))));
        w.set(a + "rope.scaling.yarn_log_multiplier", Value::f32(0.1f));
    }
    if (s.attn_temperature_scale) {  // Mistral-Large-3's: beta and the floor's length
        const int64_t length = s.attn_temperature_length > 0 ? s.attn_temperature_length
                               : s.original_context > 0        ? s.original_context
                                                               : std::max<int64_t>(1, s.context_length / 4);
        w.set(a + "attention.temperature_scale", Value::f32(*s.attn_temperature_scale));
        w.set(a + "attention.temperature_length", Value::u32(uint32_t(length)));
    }
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens);

    Rng rng(s.seed);
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);

    add.matrix("token_embd.weight", s.dim, vocab_size, 1.0f);
    add.f32("output_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    const size_t elem = s.type == GgmlType::F32 ? 4 : 2;
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.norm(p + "attn_norm.weight", s.dim);
        if (ql > 0) {
            add.matrix(p + "attn_q_a.weight", s.dim, ql, 1.0f / std::sqrt(float(s.dim)));
            add.norm(p + "attn_q_a_norm.weight", ql);
            add.matrix(p + "attn_q_b.weight", ql, s.n_heads * hk, 1.0f / std::sqrt(float(ql)));
        } else {
            add.matrix(p + "attn_q.weight", s.dim, s.n_heads * hk, 1.0f / std::sqrt(float(s.dim)));
        }
        add.matrix(p + "attn_kv_a_mqa.weight", s.dim, kvl + rope, 1.0f / std::sqrt(float(s.dim)));
        add.norm(p + "attn_kv_a_norm.weight", kvl);
        // kv_b [kvl, H (nope + v)]: per head nope K rows then v V rows.
        const std::vector<uint8_t> kv_b = random_tensor(rng, kvl * s.n_heads * (nope + v), 1.0f / std::sqrt(float(kvl)), s.type);
        add.count(kvl * s.n_heads * (nope + v));
        if (!s.mla_split) {
            w.add_tensor(p + "attn_kv_b.weight", s.type, {kvl, s.n_heads * (nope + v)}, kv_b);
        } else {  // k_b [nope, kvl, H]: each head's K rows transposed; v_b [kvl, v, H]: its V rows
            std::vector<uint8_t> k_b(size_t(nope * kvl * s.n_heads) * elem), v_b(size_t(kvl * v * s.n_heads) * elem);
            for (int64_t h = 0; h < s.n_heads; ++h) {
                for (int64_t j = 0; j < nope; ++j)
                    for (int64_t i = 0; i < kvl; ++i)
                        std::memcpy(k_b.data() + size_t((h * kvl + i) * nope + j) * elem,
                                    kv_b.data() + size_t((h * (nope + v) + j) * kvl + i) * elem, elem);
                std::memcpy(v_b.data() + size_t(h * v * kvl) * elem, kv_b.data() + size_t((h * (nope + v) + nope) * kvl) * elem,
                            size_t(v * kvl) * elem);
            }
            w.add_tensor(p + "attn_k_b.weight", s.type, {nope, kvl, s.n_heads}, std::move(k_b));
            w.add_tensor(p + "attn_v_b.weight", s.type, {kvl, v, s.n_heads}, std::move(v_b));
        }
        add.matrix(p + "attn_output.weight", s.n_heads * v, s.dim, out_scale / std::sqrt(float(s.n_heads * v)));
        add.norm(p + "ffn_norm.weight", s.dim);
        if (l < s.leading_dense) {
            add.swiglu(p, "", s.dim, s.ffn_dim, out_scale);
            continue;
        }
        add.router(p, s.dim, s.n_experts);
        if (selection_bias)
            add.f32(p + "exp_probs_b.bias", {s.n_experts}, random_tensor(rng, s.n_experts, 0.3f, GgmlType::F32));
        add.swiglu_experts(p, s.dim, f, s.n_experts, out_scale);
        if (fs > 0) add.swiglu(p, "_shexp", s.dim, fs, out_scale);
    }
    return add.params();
}

}  // namespace pagoda::model
