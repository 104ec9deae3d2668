// gen-model's `qwen35` and `qwen35moe` writers (random_model.h): the metadata keys llama.cpp's
// converter (Qwen3NextModel.set_gguf_parameters, as its Qwen3.5 models inherit it) writes and the
// tensors by llama.cpp's names, in the form its converter hands them over: ssm_a already -exp(A_log),
// ssm_conv1d squeezed to [kernel, channels], value heads tiled over the key heads, norms as 1 + w.
// Every full_attention_interval-th layer (4) is a gated full attention layer (attn_q holds each
// head's query then its output gate; per-head Q/K norms), the others gated DeltaNet layers with
// ssm.group_count = the KV heads, ssm.time_step_rank = the heads and ssm.state_size = the head size.
// A quarter of each head rotates (partial_rotary_factor 0.25) with M-RoPE sections [11, 11, 10, 0]
// scaled to it. qwen35moe: routed experts and a sigmoid-gated shared expert (ffn_gate_inp_shexp).
// nextn_layers appends that many NextN (MTP) blocks, stored for llama.cpp and not run.
// qwen3next (Qwen3-Next: always experts): the same keys but no M-RoPE sections; its DeltaNet
// projections as its converter writes them: attn_qkv + attn_gate (or, with fused_qkvz, older
// converters' ssm_in: per key head q, k, its group's v rows, their z rows) and ssm_ba (per key head
// its group's beta rows, then their alpha rows), value heads grouped per key head (not reordered).
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "hf/hf_qwen35.h"
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

namespace {

struct DeltaHeads {
    int64_t nk = 0, nv = 0, hd = 0;
};

// Older qwen3next files' ssm_in: the same q|k|v and z matrices the split form writes (the same random
// draws, so both forms are one model), their rows interleaved per key head g as Hugging Face's
// in_proj_qkvz: q_g, k_g, the group's v rows, the group's z rows.
void add_fused_qkvz(gguf::Writer& w, Rng& rng, const RandomModelSpec& s, const std::string& p, DeltaHeads h,
                    float scale) {
    const int64_t key_dim = h.nk * h.hd, value_dim = h.nv * h.hd, vz = h.nv / h.nk * h.hd;
    const std::vector<uint8_t> qkv = random_tensor(rng, s.dim * (2 * key_dim + value_dim), scale, s.type);
    const std::vector<uint8_t> z = random_tensor(rng, s.dim * value_dim, scale, s.type);
    const size_t row = size_t(*gguf::row_size(s.type, s.dim));
    std::vector<uint8_t> fused;
    fused.reserve(qkv.size() + z.size());
    auto rows = [&](const std::vector<uint8_t>& from, int64_t first, int64_t count) {
        fused.insert(fused.end(), from.begin() + std::ptrdiff_t(size_t(first) * row),
                     from.begin() + std::ptrdiff_t(size_t(first + count) * row));
    };
    for (int64_t g = 0; g < h.nk; ++g) {
        rows(qkv, g * h.hd, h.hd);
        rows(qkv, key_dim + g * h.hd, h.hd);
        rows(qkv, 2 * key_dim + g * vz, vz);
        rows(z, g * vz, vz);
    }
    w.add_tensor(p + "ssm_in.weight", s.type, {s.dim, 2 * key_dim + 2 * value_dim}, std::move(fused));
}

}  // namespace

int64_t build_random_qwen35(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    const LayerManifest m(s.arch);
    const bool next = s.arch == "qwen3next";
    const bool moe = random_detail::check_dense_or_experts(s, m);
    if (s.fused_qkvz && !next) fail("gen-model: the fused ssm_in projection is qwen3next's");
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty()) fail("gen-model: {} takes no --rope-scaling or rank head", s.arch);
    if (s.nextn_layers < 0 || s.nextn_layers > 4) fail("gen-model: {} NextN layers is out of range (0..4)", s.nextn_layers);
    if (s.n_layers < 4) fail("gen-model: {} needs at least 4 layers (every 4th is the full attention one)", s.arch);
    const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    const int64_t rope = hd / 4 / 2 * 2;  // partial_rotary_factor 0.25, even
    if (rope < 2) fail("gen-model: the head size {} is too small to rotate a quarter of it", hd);
    // The DeltaNet: key heads = KV heads, value heads = heads, both of the head size.
    const int64_t nk = s.n_kv_heads, nv = s.n_heads, kernel = 4;
    const int64_t key_dim = nk * hd, value_dim = nv * hd, conv_dim = 2 * key_dim + value_dim;
    const int64_t f = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    const int64_t fs = s.shared_expert_ffn_dim > 0 ? s.shared_expert_ffn_dim : f;
    const int64_t blocks = s.n_layers + s.nextn_layers;
    const int64_t interval = 4;
    const bool qk_norm = m.d.qk_norm == arch::Has::yes, shared_gate = m.has("ffn_gate_inp_shexp.weight");

    const std::string a = s.arch + ".";
    random_detail::write_decoder_header(s, {.arch = s.arch, .blocks = blocks, .ffn_dim = s.ffn_dim,
                                                  .kv_heads = s.n_kv_heads, .rms_eps = 1e-6f}, w);
    w.set(a + "attention.key_length", Value::u32(uint32_t(hd)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(hd)));
    w.set(a + "ssm.conv_kernel", Value::u32(uint32_t(kernel)));
    w.set(a + "ssm.state_size", Value::u32(uint32_t(hd)));
    w.set(a + "ssm.group_count", Value::u32(uint32_t(nk)));
    w.set(a + "ssm.time_step_rank", Value::u32(uint32_t(nv)));
    w.set(a + "ssm.inner_size", Value::u32(uint32_t(value_dim)));
    w.set(a + "full_attention_interval", Value::u32(uint32_t(interval)));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(rope)));
    if (!next) {  // Qwen3.5's [11, 11, 10] of 32 pairs, scaled to this rotary width (text runs them all at one position)
        const int64_t pairs = rope / 2, t = pairs * 11 / 32, h = pairs * 11 / 32;
        w.set(a + "rope.dimension_sections", Value::i32s({int32_t(t), int32_t(h), int32_t(pairs - t - h), 0}));
    }
    if (moe) {
        random_detail::write_expert_keys(s, f, w);
        w.set(a + "expert_shared_feed_forward_length", Value::u32(uint32_t(fs)));
    }
    if (s.nextn_layers > 0) w.set(a + "nextn_predict_layers", Value::u32(uint32_t(s.nextn_layers)));
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens);

    Rng rng(s.seed);
    const float in_scale = 1.0f / std::sqrt(float(s.dim));
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);

    add.matrix("token_embd.weight", s.dim, vocab_size, s.embed_scale);
    add.norm("output_norm.weight", s.dim);
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, in_scale);
    for (int64_t l = 0; l < blocks; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        const bool full = l >= s.n_layers || (l + 1) % interval == 0;  // NextN blocks are full attention ones
        add.norm(p + "attn_norm.weight", s.dim);
        add.norm(p + "post_attention_norm.weight", s.dim);
        if (full) {
            add.matrix(p + "attn_q.weight", s.dim, 2 * s.n_heads * hd, in_scale);
            add.matrix(p + "attn_k.weight", s.dim, s.n_kv_heads * hd, in_scale);
            add.matrix(p + "attn_v.weight", s.dim, s.n_kv_heads * hd, in_scale);
            add.matrix(p + "attn_output.weight", s.n_heads * hd, s.dim, out_scale / std::sqrt(float(s.n_heads * hd)));
            if (qk_norm) {
                add.norm(p + "attn_q_norm.weight", hd);
                add.norm(p + "attn_k_norm.weight", hd);
            }
        } else {
            if (s.fused_qkvz) {
                add_fused_qkvz(w, rng, s, p, {nk, nv, hd}, in_scale);
                add.count(s.dim * (conv_dim + value_dim));
            } else {
                add.matrix(p + "attn_qkv.weight", s.dim, conv_dim, in_scale);
                add.matrix(p + "attn_gate.weight", s.dim, value_dim, in_scale);
            }
            // The converter squeezes conv1d.weight [C, 1, K] to [K, C] (GGUF order) and keeps it F32.
            add.f32(p + "ssm_conv1d.weight", {kernel, conv_dim},
                    random_tensor(rng, kernel * conv_dim, 1.0f / std::sqrt(float(kernel)), GgmlType::F32));
            add.f32(p + "ssm_dt.bias", {nv}, random_tensor(rng, nv, 0.5f, GgmlType::F32));
            // -exp(A_log) for A_log uniform in [log 1, log 16], as the checkpoints initialise it; computed
            // by the Hugging Face loader's own function, so the folder form's A_log gives back these bytes
            std::vector<uint8_t> decay = constant_f32(nv, 0.0f);
            float* d = reinterpret_cast<float*>(decay.data());
            for (int64_t h = 0; h < nv; ++h) d[h] = hf::ssm_a_of(std::log(16.0f) * 0.5f * (1.0f + rng.symmetric()));
            add.f32(p + "ssm_a", {nv}, std::move(decay));
            if (next) {
                add.matrix(p + "ssm_ba.weight", s.dim, 2 * nv, in_scale);
            } else {
                add.matrix(p + "ssm_alpha.weight", s.dim, nv, in_scale);
                add.matrix(p + "ssm_beta.weight", s.dim, nv, in_scale);
            }
            add.norm(p + "ssm_norm.weight", hd);
            add.matrix(p + "ssm_out.weight", value_dim, s.dim, out_scale / std::sqrt(float(value_dim)));
        }
        if (!moe) {
            add.swiglu(p, "", s.dim, s.ffn_dim, out_scale);
        } else {
            add.router(p, s.dim, s.n_experts);
            add.swiglu_experts(p, s.dim, f, s.n_experts, out_scale);
            if (shared_gate)  // the shared expert's sigmoid gate, one weight row
                add.f32(p + "ffn_gate_inp_shexp.weight", {s.dim}, random_tensor(rng, s.dim, in_scale, GgmlType::F32));
            add.swiglu(p, "_shexp", s.dim, fs, out_scale);
        }
        if (l >= s.n_layers) add.nextn(p, s.dim);
    }
    return add.params();
}

}  // namespace pagoda::model
