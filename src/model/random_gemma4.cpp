// gen-model's `gemma4` writer (random_model.h): the dense Gemma 4 text model with the metadata keys
// llama.cpp's converter (Gemma4Model over Gemma3Model) writes and its tensors by llama.cpp's names.
// Every fifth layer of six is sliding (the bool-array sliding_window_pattern), full layers carry
// "proportional" RoPE as rope_freqs.weight (1 on the rotated quarter of the head's frequencies,
// 1e30 on the rest), each layer a layer_output_scale, and per-head Q/K norms. Options:
// shared_kv_layers (the last N layers with no K/V of their own) and v_equals_k (full layers have no
// attn_v: V is the K projection, as the 31B's global layers). Norm weights are stored as used (the
// converter's norm_shift is 0 for Gemma 4). Head sizes and KV-head counts are the same on every
// kind of layer: full_head_dim / full_kv_heads give the full layers their own (the 31B's 512 / 4
// beside the sliding layers' 256 / 16). With experts (the 26B-A4B's form) every layer also has a
// router and fused gate|up experts beside its dense FFN (add_experts). per_layer_embd writes the
// E2B/E4B form: the per-layer embedding tensors (add_per_layer) and one FFN width per layer. The synthetic vocabulary is written in Gemma 4's tokenizer
// form (model "gemma4" with BPE merges, as the converter writes it); a --vocab file's keys are copied.
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
using gguf::ValueType;
using random_detail::constant_f32;
using random_detail::random_tensor;
using random_detail::Rng;
using random_detail::LayerManifest;
using random_detail::TensorAdder;

namespace {

std::vector<uint8_t> qk_norm_weights(Rng& rng, int64_t hd) {
    std::vector<uint8_t> bytes = random_tensor(rng, hd, 0.1f, GgmlType::F32);
    float* p = reinterpret_cast<float*>(bytes.data());
    const float base = std::pow(float(hd), -0.25f);
    for (int64_t i = 0; i < hd; ++i) p[i] = base * (1.0f + p[i]);
    return bytes;
}

// The synthetic SentencePiece vocabulary as a "gemma4" BPE: every normal piece of two or more
// characters is the merge of its prefix and its last letter ("▁ a", "a b", "▁a b", ...), ranked in
// token order, so each merge makes a token and any text still encodes (byte fallback for the rest).
void use_gemma4_tokenizer_model(gguf::Writer& w) {
    const auto file = w.view("gen-model");
    std::vector<std::string> tokens = file->get_strings("tokenizer.ggml.tokens");
    const std::vector<int64_t> types = file->get_ints("tokenizer.ggml.token_type");
    // Gemma 4 has U+2581 alone as a token (runs of spaces need it): it replaces the last normal piece.
    for (size_t i = tokens.size(); i-- > 0;)
        if (types[i] == 1) {
            tokens[i] = "\xE2\x96\x81";
            break;
        }
    std::vector<std::string> merges;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string& t = tokens[i];
        if (types[i] != 1 || t.size() < 2 || t == "\xE2\x96\x81") continue;  // letters and U+2581 are not merged
        merges.push_back(t.substr(0, t.size() - 1) + " " + t.substr(t.size() - 1));
    }
    w.set("tokenizer.ggml.model", Value::string("gemma4"));
    w.set("tokenizer.ggml.tokens", Value::strings(tokens));
    w.set("tokenizer.ggml.merges", Value::strings(merges));
}

// The 26B-A4B's experts beside layer p's dense FFN: the norms of both branches, the router (kept
// F32 as the converter keeps it) and its input scale, the fused gate|up and down stacks and the
// per-expert output scale. The router's input is rms_norm(x) / sqrt(dim) * scale: a scale near
// sqrt(dim) and weights of std 2/sqrt(dim) give logits of std ~2, so each top-k has clear margins.
void add_experts(TensorAdder& add, Rng& rng, const RandomModelSpec& s, const std::string& p, int64_t f, float out_scale) {
    add.norm(p + "post_ffw_norm_1.weight", s.dim);
    add.norm(p + "pre_ffw_norm_2.weight", s.dim);
    add.norm(p + "post_ffw_norm_2.weight", s.dim);
    add.router(p, s.dim, s.n_experts);
    std::vector<uint8_t> scale = random_tensor(rng, s.dim, 0.2f, GgmlType::F32);
    for (int64_t i = 0; i < s.dim; ++i) reinterpret_cast<float*>(scale.data())[i] = std::sqrt(float(s.dim)) * (1.0f + reinterpret_cast<float*>(scale.data())[i]);
    add.f32(p + "ffn_gate_inp.scale", {s.dim}, std::move(scale));
    add.experts(p + "ffn_gate_up_exps.weight", s.dim, 2 * f, s.n_experts, 1.0f / std::sqrt(float(s.dim)));
    add.experts(p + "ffn_down_exps.weight", f, s.dim, s.n_experts, out_scale / std::sqrt(float(f)));
    std::vector<uint8_t> down_scale = random_tensor(rng, s.n_experts, 0.3f, GgmlType::F32);
    for (int64_t e = 0; e < s.n_experts; ++e) reinterpret_cast<float*>(down_scale.data())[e] += 1.0f;
    add.f32(p + "ffn_down_exps.scale", {s.n_experts}, std::move(down_scale));
}

// The E-models' per-layer embeddings, P values a layer over L layers: the token table (P * L values
// a token, of spread 1/sqrt(P) as the embedding scales by sqrt(P)), the projection of the main
// embedding and its per-layer norm, then each layer's gate, projection back and norm.
void add_per_layer(TensorAdder& add, const RandomModelSpec& s, int64_t vocab_size, float out_scale) {
    const int64_t P = s.per_layer_embd, all = P * s.n_layers;
    add.matrix("per_layer_token_embd.weight", all, vocab_size, 1.0f / std::sqrt(float(P)));
    add.matrix("per_layer_model_proj.weight", s.dim, all, 1.0f / std::sqrt(float(s.dim)));
    add.norm("per_layer_proj_norm.weight", P);
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add.matrix(p + "inp_gate.weight", s.dim, P, 1.0f / std::sqrt(float(s.dim)));
        add.matrix(p + "proj.weight", P, s.dim, out_scale / std::sqrt(float(P)));
        add.norm(p + "post_norm.weight", s.dim);
    }
}

}  // namespace

int64_t build_random_gemma4(const RandomModelSpec& s, const gguf::File* vocab, gguf::Writer& w) {
    if (s.n_experts > 0) random_detail::check_expert_spec(s.arch, s.n_experts, s.n_experts_used);
    const int64_t expert_ffn = s.expert_ffn_dim > 0 ? s.expert_ffn_dim : s.ffn_dim;
    random_detail::check_decoder_sizes(s);
    if (!s.rope_scaling.empty() || !s.rank_head.empty()) fail("gen-model: gemma4 takes no --rope-scaling or rank head");
    const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.n_heads;
    if (s.head_dim == 0 && s.dim % s.n_heads) fail("gen-model: dim {} is not a multiple of {} heads", s.dim, s.n_heads);
    // Sliding layers have --head-dim (HF's head_dim) and --kv-heads; full layers their own
    // --full-head-dim (global_head_dim) and --full-kv-heads (num_global_key_value_heads).
    const int64_t hd_full = s.full_head_dim > 0 ? s.full_head_dim : hd;
    const int64_t kv_full = s.full_kv_heads > 0 ? s.full_kv_heads : s.n_kv_heads;
    if (hd_full % 8) fail("gen-model: gemma4's full head size {} must be a multiple of 8 (a quarter of it rotates)", hd_full);
    if (s.n_heads % kv_full) fail("gen-model: {} heads are not a multiple of {} full-layer KV heads", s.n_heads, kv_full);
    const int64_t period = s.swa_period > 0 ? s.swa_period : 6;
    const int64_t window = s.sliding_window > 0 ? s.sliding_window : 512;
    std::vector<bool> sliding(size_t(s.n_layers));
    for (int64_t i = 0; i < s.n_layers; ++i) sliding[size_t(i)] = i % period < period - 1;
    if (s.shared_kv_layers < 0 || s.shared_kv_layers >= s.n_layers)
        fail("gen-model: {} shared-KV layers of {} is out of range", s.shared_kv_layers, s.n_layers);
    const int64_t first_shared = s.n_layers - s.shared_kv_layers;
    for (int64_t i = first_shared; i < s.n_layers; ++i) {
        bool source = false;
        for (int64_t j = 0; j < first_shared; ++j) source = source || sliding[size_t(j)] == sliding[size_t(i)];
        if (!source) fail("gen-model: shared-KV layer {} has no earlier {} layer to share with", i, sliding[size_t(i)] ? "sliding" : "full");
    }

    // The description's manifest: per-head Q/K norms, a per-layer output scale, the E-models' PLE parts.
    const LayerManifest m(s.arch);
    const bool qk_norm = m.d.qk_norm == arch::Has::yes, output_scale = m.has("layer_output_scale.weight");
    if (s.per_layer_embd > 0 && !m.has("inp_gate.weight")) fail("gen-model: {} has no per-layer embeddings", s.arch);
    const std::string a = s.arch + ".";
    w.set("general.architecture", Value::string(s.arch));
    w.set("general.name", Value::string(s.name));
    w.set(a + "context_length", Value::u32(uint32_t(s.context_length)));
    w.set(a + "embedding_length", Value::u32(uint32_t(s.dim)));
    w.set(a + "block_count", Value::u32(uint32_t(s.n_layers)));
    if (s.per_layer_embd < 0 || s.per_layer_embd > 4096) fail("gen-model: --per-layer-embd {} is out of range", s.per_layer_embd);
    // The E-models' FFN widths, one per layer: the KV-sharing layers' doubled.
    std::vector<int64_t> ffn(size_t(s.n_layers), s.ffn_dim);
    if (s.per_layer_embd > 0) {
        for (int64_t i = first_shared; i < s.n_layers; ++i) ffn[size_t(i)] = 2 * s.ffn_dim;
        std::vector<Value> widths;
        for (int64_t f : ffn) widths.push_back(Value::u32(uint32_t(f)));
        w.set(a + "feed_forward_length", Value::array(ValueType::u32, widths));
    } else {
        w.set(a + "feed_forward_length", Value::u32(uint32_t(s.ffn_dim)));
    }
    w.set(a + "attention.head_count", Value::u32(uint32_t(s.n_heads)));
    // The converter writes one KV-head count per layer when the config has num_global_key_value_heads.
    std::vector<Value> kv_heads;
    for (bool b : sliding) kv_heads.push_back(Value::u32(uint32_t(b ? s.n_kv_heads : kv_full)));
    w.set(a + "attention.head_count_kv", Value::array(ValueType::u32, kv_heads));
    w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(1e-6f));
    w.set(a + "attention.key_length", Value::u32(uint32_t(hd_full)));
    w.set(a + "attention.value_length", Value::u32(uint32_t(hd_full)));
    w.set(a + "attention.key_length_swa", Value::u32(uint32_t(hd)));
    w.set(a + "attention.value_length_swa", Value::u32(uint32_t(hd)));
    w.set(a + "rope.freq_base", Value::f32(s.rope_theta > 0 && s.rope_theta != 10000.0f ? s.rope_theta : 1000000.0f));
    w.set(a + "rope.freq_base_swa", Value::f32(10000.0f));
    w.set(a + "rope.dimension_count", Value::u32(uint32_t(hd_full)));
    w.set(a + "rope.dimension_count_swa", Value::u32(uint32_t(hd)));
    w.set(a + "attention.sliding_window", Value::u32(uint32_t(window)));
    std::vector<Value> pattern;
    for (bool b : sliding) pattern.push_back(Value::boolean(b));
    w.set(a + "attention.sliding_window_pattern", Value::array(ValueType::boolean, pattern));
    w.set(a + "attention.shared_kv_layers", Value::u32(uint32_t(s.shared_kv_layers)));
    w.set(a + "embedding_length_per_layer_input", Value::u32(uint32_t(s.per_layer_embd)));
    if (s.n_experts > 0) {
        w.set(a + "expert_count", Value::u32(uint32_t(s.n_experts)));
        w.set(a + "expert_used_count", Value::u32(uint32_t(s.n_experts_used)));
        w.set(a + "expert_feed_forward_length", Value::u32(uint32_t(expert_ffn)));
    }
    w.set(a + "final_logit_softcapping", Value::f32(s.final_softcap));
    random_detail::write_file_type(w, s.type);

    const int64_t vocab_size = write_vocab(w, vocab, s.vocab_size, s.fim_tokens, s.image_tokens, ImageTokenSet::gemma4);
    if (!vocab) use_gemma4_tokenizer_model(w);
    Rng rng(s.seed);
    const float out_scale = 1.0f / std::sqrt(2.0f * float(s.n_layers));
    TensorAdder add(w, rng, s.type);
    // Gemma scales the embedding by sqrt(dim): rows of spread 1/sqrt(dim) give unit activations.
    add.matrix("token_embd.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    add.norm("output_norm.weight", s.dim);
    if (!s.tied_output) add.matrix("output.weight", s.dim, vocab_size, 1.0f / std::sqrt(float(s.dim)));
    std::vector<float> freqs(size_t(hd_full / 2), 1e30f);
    for (int64_t i = 0; i < hd_full / 8; ++i) freqs[size_t(i)] = 1.0f;  // partial_rotary_factor 0.25
    std::vector<uint8_t> freq_bytes(freqs.size() * 4);
    std::memcpy(freq_bytes.data(), freqs.data(), freq_bytes.size());
    add.f32("rope_freqs.weight", {hd_full / 2}, std::move(freq_bytes));
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        const bool own_kv = l < first_shared;
        const int64_t hd_l = sliding[size_t(l)] ? hd : hd_full;
        const int64_t q_dim = s.n_heads * hd_l, kv_dim = (sliding[size_t(l)] ? s.n_kv_heads : kv_full) * hd_l;
        add.norm(p + "attn_norm.weight", s.dim);
        add.matrix(p + "attn_q.weight", s.dim, q_dim, 1.0f / std::sqrt(float(s.dim)));
        if (own_kv) {
            add.matrix(p + "attn_k.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
            if (!(s.v_equals_k && !sliding[size_t(l)])) add.matrix(p + "attn_v.weight", s.dim, kv_dim, 1.0f / std::sqrt(float(s.dim)));
        }
        add.matrix(p + "attn_output.weight", q_dim, s.dim, out_scale / std::sqrt(float(q_dim)));
        // Gemma 4 attends with scale 1, the Q/K norms' weights carry the scale: near hd^-1/4 each,
        // so q.k has the spread of an ordinary q.k / sqrt(hd) and the random model's attention is
        // not one-hot (a one-hot softmax turns quantisation noise into flipped attention).
        if (qk_norm) {
            add.f32(p + "attn_q_norm.weight", {hd_l}, qk_norm_weights(rng, hd_l));
            if (own_kv) add.f32(p + "attn_k_norm.weight", {hd_l}, qk_norm_weights(rng, hd_l));
        }
        add.norm(p + "post_attention_norm.weight", s.dim);
        if (output_scale)
            add.f32(p + "layer_output_scale.weight", {1}, constant_f32(1, 0.5f + 0.5f * float(l + 1) / float(s.n_layers)));
        add.norm(p + "ffn_norm.weight", s.dim);
        add.swiglu(p, "", s.dim, ffn[size_t(l)], out_scale);
        add.norm(p + "post_ffw_norm.weight", s.dim);
        if (s.n_experts > 0) add_experts(add, rng, s, p, expert_ffn, out_scale);
    }
    if (s.per_layer_embd > 0) add_per_layer(add, s, vocab_size, out_scale);
    return add.params();
}

}  // namespace pagoda::model
