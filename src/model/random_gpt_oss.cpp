// gen-model's `gpt-oss` writer (random_model.h): the metadata keys llama.cpp's converter
// (GptOssModel) writes, and its tensors by llama.cpp's names: attention with Q/K/V/O biases and
// per-head sinks, post_attention_norm before the MoE, a biased router and stacked experts with
// biases (gate and up split apart, as the converter splits the interleaved gate_up_proj), the
// experts optionally in MXFP4 as every gpt-oss GGUF stores them. Small configs keep gpt-oss's form:
// YaRN (factor 32 over an original context of a quarter of context_length), alternating sliding
// layers (window spec.sliding_window, 8 by default), the softmax of the top-k router.
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/random_model.h"
#include "model/random_tensors.h"
#include "quant/quantize.h"

namespace pagoda::model {

using gguf::GgmlType;
using gguf::Value;
using random_detail::constant_f32;
using random_detail::random_tensor;
using random_detail::Rng;
using random_detail::LayerManifest;
using random_detail::TensorAdder;

int64_t build_random_gpt_oss(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    random_detail::check_expert_spec(s.arch, s.n_experts, s.n_experts_used);
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty() || s.shared_expert_ffn_dim > 0)
        fail("gen-model: gpt-oss takes no --rope-scaling, rank head or shared expert (it is YaRN, routed experts only)");
    const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    if (head_dim % 2) fail("gen-model: the head size {} must be even for RoPE", head_dim);
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    if (s.mxfp4_experts && (s.dim % 32 || f % 32))
        fail("gen-model: MXFP4 experts need dim ({}) and the expert FFN width ({}) to be multiples of 32", s.dim, f);
    const int64_t window = s.sliding_window > 0 ? s.sliding_window : 8;
    const int64_t original = s.original_context > 0 ? s.original_context : std::max<int64_t>(1, s.context_length / 4);

    // The biases, sinks and router bias where the description's manifest has them.
    const LayerManifest m(s.arch);
    const bool qkv_bias = m.d.qkv_bias == arch::Has::yes, o_bias = m.d.o_bias, sinks = m.has("attn_sinks.weight");
    const bool router_bias = m.has("ffn_gate_inp.bias"), expert_bias = m.has("ffn_gate_exps.bias");

    const std::string a = s.arch + ".";
    // feed_forward_length: the expert width (the converter writes intermediate_size twice).
    random_detail::write_decoder_header(s, {.arch = s.arch, .blocks = s.n_layers, .ffn_dim = f,
                                                  .kv_heads = s.n_kv_heads, .rms_eps = 1e-5f}, w);
    w.set(a + "expert_count", Value::u32(uint32_t(s.n_experts)));
    w.set(a + "expert_used_count", Value::u32(uint32_t(s.n_experts_used)));
    w.set(a + "attention.key_length", Value::u32(uint32_t(head_dim)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(head_dim)));
    w.set(a + "attention.sliding_window", Value::u32(uint32_t(window)));
    w.set(a + "expert_feed_forward_length", Value::u32(uint32_t(f)));
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", Value::f32(32.0f));
    w.set(a + "rope.scaling.original_context_length", Value::u32(uint32_t(original)));
    w.set(a + "rope.scaling.yarn_beta_fast", Value::f32(32.0f));
    w.set(a + "rope.scaling.yarn_beta_slow", Value::f32(1.0f));
    if (s.swa_period > 0) w.set(a + "attention.sliding_window_pattern", Value::u32(uint32_t(s.swa_period)));
    // llama.cpp's file types: 0 all F32, 1 mostly F16, 32 mostly BF16, 38 mostly MXFP4 (MoE).
    w.set("general.file_type", Value::u32(s.mxfp4_experts ? 38 : s.type == GgmlType::F32 ? 0 : s.type == GgmlType::F16 ? 1 : 32));

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens);

    Rng rng(s.seed);
    const int64_t q_dim = s.n_heads * head_dim, kv_dim = s.n_kv_heads * head_dim;
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);
    auto experts = [&](const std::string& name, int64_t cols, int64_t rows, float stddev) {
        const int64_t n = cols * rows * s.n_experts;
        if (!s.mxfp4_experts) {
            w.add_tensor(name, s.type, {cols, rows, s.n_experts}, random_tensor(rng, n, stddev, s.type));
        } else {  // quantised row by row from f32 values
            const std::vector<uint8_t> values = random_tensor(rng, n, stddev, GgmlType::F32);
            const size_t row_bytes = *gguf::row_size(GgmlType::MXFP4, cols);
            std::vector<uint8_t> bytes(row_bytes * size_t(rows * s.n_experts));
            for (int64_t r = 0; r < rows * s.n_experts; ++r)
                quant::quantize_row(GgmlType::MXFP4, reinterpret_cast<const float*>(values.data()) + r * cols,
                                    bytes.data() + size_t(r) * row_bytes, cols);
            w.add_tensor(name, GgmlType::MXFP4, {cols, rows, s.n_experts}, std::move(bytes));
        }
        add.count(n);
    };

    add.matrix("token_embd.weight", s.dim, vocab_size, 1.0f);
    add.f32("output_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.f32(p + "attn_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
        add.matrix(p + "attn_q.weight", s.dim, q_dim, 1.0f / std::sqrt(float(s.dim)));
        if (qkv_bias) add.f32(p + "attn_q.bias", {q_dim}, random_tensor(rng, q_dim, 0.1f, GgmlType::F32));
        add.matrix(p + "attn_k.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        if (qkv_bias) add.f32(p + "attn_k.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        add.matrix(p + "attn_v.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        if (qkv_bias) add.f32(p + "attn_v.bias", {kv_dim}, random_tensor(rng, kv_dim, 0.1f, GgmlType::F32));
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        if (o_bias) add.f32(p + "attn_output.bias", {s.dim}, random_tensor(rng, s.dim, 0.1f * out_scale, GgmlType::F32));
        // Sinks of the order of the scores, so they take a real share of each softmax.
        if (sinks) add.f32(p + "attn_sinks.weight", {s.n_heads}, random_tensor(rng, s.n_heads, 1.0f, GgmlType::F32));
        add.f32(p + "post_attention_norm.weight", {s.dim}, constant_f32(s.dim, 1.0f));
        add.router(p, s.dim, s.n_experts);
        if (router_bias) add.f32(p + "ffn_gate_inp.bias", {s.n_experts}, random_tensor(rng, s.n_experts, 0.5f, GgmlType::F32));
        // Each expert stack followed by its bias (rows x experts), as the converter orders them.
        const auto bias = [&](const char* name, int64_t rows, float stddev) {
            if (expert_bias) add.f32(p + name, {rows, s.n_experts}, random_tensor(rng, rows * s.n_experts, stddev, GgmlType::F32));
        };
        experts(p + "ffn_gate_exps.weight", s.dim, f, 1.0f / std::sqrt(float(s.dim)));
        bias("ffn_gate_exps.bias", f, 0.1f);
        experts(p + "ffn_up_exps.weight", s.dim, f, 1.0f / std::sqrt(float(s.dim)));
        bias("ffn_up_exps.bias", f, 0.1f);
        experts(p + "ffn_down_exps.weight", f, s.dim, out_scale / std::sqrt(float(f)));
        bias("ffn_down_exps.bias", s.dim, 0.1f * out_scale);
    }
    return add.params();
}

}  // namespace pagoda::model
