// gen-model's `minimax-m2` writer (random_model.h): the metadata keys llama.cpp's converter
// (MiniMaxM2Model) writes and its tensors by llama.cpp's names. Half of each head rotated
// (rope.dimension_count = head_dim / 2, as MiniMax-M2's rotary_dim 64 of 128), Q/K norm weights over
// the whole projected rows (n_heads x head_dim and n_kv_heads x head_dim), no biases, and in every
// layer an F32 router, its selection bias exp_probs_b and the stacked experts; the router is sigmoid
// (expert_gating_func 2, as the converter writes it) and no expert_weights_norm key is written (the
// architecture's default, renormalised, applies).
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_model.h"
#include "model/random_tensors.h"

namespace pagoda::model {

using gguf::GgmlType;
using gguf::Value;
using random_detail::random_tensor;
using random_detail::Rng;
using random_detail::LayerManifest;
using random_detail::TensorAdder;

int64_t build_random_minimax_m2(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    random_detail::check_expert_spec(s.arch, s.n_experts, s.n_experts_used);
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty() || s.shared_expert_ffn_dim > 0 || s.mxfp4_experts ||
        s.qk_norm || s.nextn_layers > 0)
        fail("gen-model: minimax-m2 takes no --rope-scaling, rank head, shared expert, MXFP4 experts, --qk-norm (its "
             "Q/K norms are always written) or --nextn-layers");
    const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    const int64_t rope = hd / 2 / 2 * 2;
    if (rope < 2) fail("gen-model: the head size {} is too small to rotate half of it", hd);
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const LayerManifest m(s.arch);
    const bool qk_norm = m.d.qk_norm == arch::Has::yes, selection_bias = m.has("exp_probs_b.bias");

    const std::string a = s.arch + ".";
    random_detail::write_decoder_header(s, {.arch = s.arch, .blocks = s.n_layers, .ffn_dim = f,
                                            .kv_heads = s.n_kv_heads, .rms_eps = 1e-6f}, w);
    w.set(a + "attention.key_length", Value::u32(uint32_t(hd)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(hd)));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(rope)));
    random_detail::write_expert_keys(s, f, w);
    w.set(a + "expert_gating_func", Value::u32(uint32_t(m.d.gating)));
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens);

    Rng rng(s.seed);
    const int64_t q_dim = s.n_heads * hd, kv_dim = s.n_kv_heads * hd;
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);

    add.matrix("token_embd.weight", s.dim, vocab_size, 1.0f);
    add.norm("output_norm.weight", s.dim);
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.norm(p + "attn_norm.weight", s.dim);
        add.matrix(p + "attn_q.weight", s.dim, q_dim, 1.0f / std::sqrt(float(s.dim)));
        add.matrix(p + "attn_k.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        add.matrix(p + "attn_v.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        if (qk_norm) {  // over the whole projected rows
            add.norm(p + "attn_q_norm.weight", q_dim);
            add.norm(p + "attn_k_norm.weight", kv_dim);
        }
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        add.norm(p + "ffn_norm.weight", s.dim);
        add.router(p, s.dim, s.n_experts);
        // The selection bias is large enough to change some selections against the plain scores.
        if (selection_bias)
            add.f32(p + "exp_probs_b.bias", {s.n_experts}, random_tensor(rng, s.n_experts, 0.3f, GgmlType::F32));
        add.swiglu_experts(p, s.dim, f, s.n_experts, out_scale);
    }
    return add.params();
}

}  // namespace pagoda::model
