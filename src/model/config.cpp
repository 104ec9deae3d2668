#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "arch/arch_description.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace pagoda::model {

std::string ModelConfig::describe() const {
    const arch::ArchDescription* d = arch::find_architecture(arch);
    if (d && d->kind == arch::Kind::encoder)  // bert has learned positions, nomic-bert RoPE, jina-bert-v2 ALiBi
        return fmt::format("{} '{}': {} layers, dim {}, {} heads (head dim {}), FFN {}, vocab {}, context {}, {}, "
                           "LayerNorm eps {:g}, {} attention (encoder)", arch, name, n_layers, dim, n_heads, head_dim,
                           ffn_dim, vocab_size, context_length,
                           arch == "bert" ? "learned positions" : arch == "jina-bert-v2" ? "ALiBi (max bias 8)"
                                                                : fmt::format("RoPE neox theta {}", rope_theta),
                           norm_eps, causal ? "causal" : "bidirectional");
    return fmt::format("{} '{}': {} layers, dim {}, {} heads ({} KV, head dim {}), FFN {}, vocab {}, "
                       "context {}, RoPE {} theta {} dims {}{}", arch, name, n_layers, dim, n_heads,
                       n_kv_heads, head_dim, ffn_dim, vocab_size, context_length,
                       rope_style == RopeStyle::neox ? "neox" : "normal", rope_theta, rope_dims,
                       qkv_bias ? ", QKV bias" : "") +
           (n_experts > 0 ? fmt::format(", {} experts (top {}{}{}, FFN {}){}", n_experts, n_experts_used,
                                        expert_gating == 2 ? ", sigmoid" : expert_gating == 3 ? ", softmax of the top k" : "",
                                        expert_weights_norm ? ", renormalised" : "", expert_ffn_dim,
                                        shared_expert_ffn_dim > 0 ? fmt::format(", shared expert FFN {}", shared_expert_ffn_dim) : "")
                          : "") +
           (arch == "deepseek2" ? fmt::format(", MLA (q rank {}, kv rank {}, nope {}, rope {}, v {}{}), {} leading dense, "
                                              "{} shared experts", q_lora_rank, kv_lora_rank, qk_nope_dim, rope_dims,
                                              v_head_dim,
                                              mla_absorbed ? fmt::format("; absorbed: one latent KV head of {}", kv_lora_rank + rope_dims)
                                                           : "",
                                              leading_dense_layers, n_shared_experts)
                                : "") +
           (arch == "glm4moe" ? fmt::format(", {} leading dense, {} shared experts", leading_dense_layers, n_shared_experts)
                              : "");
}

namespace {

// The expert keys as llama.cpp's converters write them. A qwen2moe file without the shared expert's
// width key takes it from blk.0.ffn_gate_shexp.weight, as the tensor is what gets computed.
void read_experts(const gguf::File& f, ModelConfig& c, const arch::ArchDescription& d) {
    const bool moe_arch = d.experts == arch::Has::yes;
    const std::string a = c.arch + ".";
    auto count = [&](const std::string& key) {
        const int64_t v = f.get_int(key);
        if (v < 0 || v > 4096) fail("{}: {} = {} is out of range", f.name(), key, v);
        return v;
    };
    c.n_experts = f.has(a + "expert_count") ? count(a + "expert_count") : 0;
    if (moe_arch && c.n_experts == 0) fail("{}: {} needs the key {}expert_count (> 0)", f.name(), c.arch, a);
    if (c.n_experts == 0) return;
    if (!f.has(a + "expert_used_count")) fail("{}: key {}expert_used_count is missing", f.name(), a);
    c.n_experts_used = count(a + "expert_used_count");
    if (c.n_experts_used < 1 || c.n_experts_used > c.n_experts)
        fail("{}: {}expert_used_count = {} must be 1..{} (the expert count)", f.name(), a, c.n_experts_used, c.n_experts);
    const std::string ffn_key = f.has(a + "expert_feed_forward_length") ? a + "expert_feed_forward_length"
                                                                          : a + "feed_forward_length";
    if (!f.has(ffn_key)) fail("{}: key {}expert_feed_forward_length is missing", f.name(), a);
    c.expert_ffn_dim = f.get_int(ffn_key);
    if (c.expert_ffn_dim <= 0 || c.expert_ffn_dim > (int64_t(1) << 24))
        fail("{}: {} = {} is out of range", f.name(), ffn_key, c.expert_ffn_dim);
    // A gated shared expert (the manifest's ffn_gate_inp_shexp): in every expert layer (qwen2moe), or
    // where the file has one, its width key or tensors (qwen35moe). deepseek2's and glm4moe's ungated
    // ones are read by read_moe_layout.
    const arch::TensorEntry* gated_shared = d.layer_tensor("ffn_gate_inp_shexp.weight");
    const bool shared = gated_shared && (gated_shared->presence == arch::Presence::experts ||
                                         f.has(a + "expert_shared_feed_forward_length") ||
                                         f.find_tensor("blk.0.ffn_gate_shexp.weight"));
    if (shared) {
        if (f.has(a + "expert_shared_feed_forward_length")) {
            c.shared_expert_ffn_dim = f.get_int(a + "expert_shared_feed_forward_length");
        } else if (const auto* t = f.find_tensor("blk.0.ffn_gate_shexp.weight"); t && t->shape.size() == 2) {
            c.shared_expert_ffn_dim = t->shape[1];
        } else {
            fail("{}: key {}expert_shared_feed_forward_length and tensor blk.0.ffn_gate_shexp.weight are missing",
                 f.name(), a);
        }
        if (c.shared_expert_ffn_dim <= 0 || c.shared_expert_ffn_dim > (int64_t(1) << 24))
            fail("{}: the shared expert's FFN width {} is out of range", f.name(), c.shared_expert_ffn_dim);
    }
    // Where the file does not say: what llama.cpp does for the architecture (its description).
    c.expert_weights_norm = f.get_bool_or(a + "expert_weights_norm", d.expert_weights_norm);
    // llama.cpp's numbering: 1 softmax, 2 sigmoid, 3 softmax over the selected.
    c.expert_gating = f.get_int_or(a + "expert_gating_func", int64_t(d.gating));
    if (c.expert_gating < 1 || c.expert_gating > 3)
        fail("{}: {}expert_gating_func = {} is not supported (1 softmax, 2 sigmoid, 3 softmax of the selected)", f.name(),
             a, c.expert_gating);
    c.expert_weights_scale = float(f.get_float_or(a + "expert_weights_scale", 1.0));
    if (!(c.expert_weights_scale > 0) || !std::isfinite(c.expert_weights_scale))
        fail("{}: {}expert_weights_scale = {} must be positive", f.name(), a, c.expert_weights_scale);
    c.expert_groups = f.get_int_or(a + "expert_group_count", 0);
    c.expert_groups_used = f.get_int_or(a + "expert_group_used_count", 0);
    if (c.expert_groups > 1 && (c.n_experts % c.expert_groups != 0 || c.expert_groups_used < 1 ||
                                c.expert_groups_used > c.expert_groups ||
                                c.expert_groups_used * (c.n_experts / c.expert_groups) < c.n_experts_used))
        fail("{}: {}expert_group_count = {} with expert_group_used_count = {} does not fit {} experts (top {})", f.name(),
             a, c.expert_groups, c.expert_groups_used, c.n_experts, c.n_experts_used);
}

// deepseek2's and glm4moe's layer layout: leading dense layers ({arch}.leading_dense_block_count,
// required by deepseek2, 0 when absent for glm4moe as llama.cpp reads it), ungated shared experts of
// the expert width ({arch}.expert_shared_count) and trailing NextN / multi-token-prediction blocks
// ({arch}.nextn_predict_layers: stored in the file, not run, as llama.cpp skips them).
void read_moe_layout(const gguf::File& f, ModelConfig& c, bool leading_required) {
    const std::string a = c.arch + ".";
    if (leading_required && !f.has(a + "leading_dense_block_count"))
        fail("{}: key {}leading_dense_block_count is missing", f.name(), a);
    c.leading_dense_layers = f.get_int_or(a + "leading_dense_block_count", 0);
    if (c.leading_dense_layers < 0 || c.leading_dense_layers > c.n_layers)
        fail("{}: {}leading_dense_block_count = {} must be 0..{} (the block count)", f.name(), a, c.leading_dense_layers,
             c.n_layers);
    c.n_shared_experts = f.get_int_or(a + "expert_shared_count", 0);
    if (c.n_shared_experts < 0 || c.n_shared_experts > 1024)
        fail("{}: {}expert_shared_count = {} is out of range", f.name(), a, c.n_shared_experts);
    c.shared_expert_ffn_dim = c.n_shared_experts * c.expert_ffn_dim;
    c.nextn_layers = f.get_int_or(a + "nextn_predict_layers", 0);
    if (c.nextn_layers < 0 || c.nextn_layers >= c.n_layers)
        fail("{}: {}nextn_predict_layers = {} must be 0..{} (below the block count)", f.name(), a, c.nextn_layers,
             c.n_layers - 1);
    c.n_layers -= c.nextn_layers;
    if (c.nextn_layers > 0)
        log_info("{}: {} trailing NextN (multi-token prediction) block(s) stored but not run", f.name(), c.nextn_layers);
    if (c.leading_dense_layers > c.n_layers)
        fail("{}: {}leading_dense_block_count = {} exceeds the {} layers run", f.name(), a, c.leading_dense_layers,
             c.n_layers);
}

// deepseek2's attention shapes. Older converters write key_length = nope + rope and value_length = v;
// newer ones (written for the absorbed form) key_length = kv_lora + rope, value_length = kv_lora and
// the per-head sizes as key_length_mla / value_length_mla.
void read_mla(const gguf::File& f, ModelConfig& c, const std::function<int64_t(const std::string&)>& positive) {
    const std::string a = c.arch + ".";
    auto need = [&](const std::string& key) {
        if (!f.has(a + key)) fail("{}: key {}{} is missing (deepseek2 needs it)", f.name(), a, key);
        return positive(a + key);
    };
    c.kv_lora_rank = need("attention.kv_lora_rank");
    c.q_lora_rank = f.get_int_or(a + "attention.q_lora_rank", 0);
    if (c.q_lora_rank < 0 || c.q_lora_rank > (int64_t(1) << 24))
        fail("{}: {}attention.q_lora_rank = {} is out of range", f.name(), a, c.q_lora_rank);
    c.rope_dims = need("rope.dimension_count");
    const bool mla_keys = f.has(a + "attention.key_length_mla");
    const int64_t k = need(mla_keys ? "attention.key_length_mla" : "attention.key_length");
    c.v_head_dim = need(mla_keys ? "attention.value_length_mla" : "attention.value_length");
    if (mla_keys && f.has(a + "attention.key_length") && positive(a + "attention.key_length") != c.kv_lora_rank + c.rope_dims)
        fail("{}: {}attention.key_length = {} contradicts kv_lora_rank {} + rope.dimension_count {} (with key_length_mla "
             "it is the latent key's width)", f.name(), a, f.get_int(a + "attention.key_length"), c.kv_lora_rank, c.rope_dims);
    if (k <= c.rope_dims || c.rope_dims % 2 != 0)
        fail("{}: deepseek2 key length {} must exceed the even RoPE dimension count {} (its no-RoPE part)", f.name(), k,
             c.rope_dims);
    c.qk_nope_dim = k - c.rope_dims;
    c.head_dim = k;
    if (c.v_head_dim > c.head_dim)
        fail("{}: deepseek2 value length {} exceeds the key length {}: not supported (values are padded to the key's width)",
             f.name(), c.v_head_dim, c.head_dim);
    c.n_kv_heads = c.n_heads;  // the decompressed cache: one K and V per query head
    read_moe_layout(f, c, true);
    c.yarn_log_multiplier = f.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0);
    if (!(c.yarn_log_multiplier >= 0 && c.yarn_log_multiplier < 10))
        fail("{}: {}rope.scaling.yarn_log_multiplier = {} is out of range", f.name(), a, c.yarn_log_multiplier);
}

}  // namespace

ModelConfig read_config(const gguf::File& f) {
    ModelConfig c;
    c.arch = f.get_string_or("general.architecture", "");
    if (c.arch.empty()) fail("{}: no general.architecture key: not a model file", f.name());
    const arch::ArchDescription* desc = arch::find_architecture(c.arch);
    const auto& supported = supported_architectures();
    if (!desc || std::find(supported.begin(), supported.end(), c.arch) == supported.end())
        fail("{}: architecture '{}' is not supported (supported: {})", f.name(), c.arch, fmt::join(supported, ", "));
    const arch::ArchDescription& d = *desc;
    c.name = f.get_string_or("general.name", "");
    const std::string a = c.arch + ".";
    auto positive = [&](const std::string& key) {
        int64_t v = f.get_int(key);
        if (v <= 0 || v > (int64_t(1) << 24)) fail("{}: {} = {} is out of range", f.name(), key, v);
        return v;
    };
    c.n_layers = positive(a + "block_count");
    c.dim = positive(a + "embedding_length");
    c.n_heads = positive(a + "attention.head_count");
    const auto* kv_count = f.find(a + "attention.head_count_kv");
    c.n_kv_heads = kv_count && !kv_count->as_array() ? positive(a + "attention.head_count_kv") : c.n_heads;
    if (const auto* kv = kv_count; kv && kv->as_array()) {
        // gemma4 writes one count per layer (sliding and full layers differ). The paged KV holds the
        // largest count on every layer; a layer with fewer heads repeats each of them (its builder's
        // job), so every count must divide the largest.
        if (c.arch != "gemma4") fail("{}: {}attention.head_count_kv is an array (per-layer counts), read for gemma4 only", f.name(), a);
        std::vector<int64_t> counts;
        for (const auto& item : kv->as_array()->items) {
            const int64_t n = item.as_int().value_or(0);
            if (n <= 0 || n > c.n_heads) fail("{}: {}attention.head_count_kv holds {}, out of range", f.name(), a, n);
            counts.push_back(n);
        }
        if (counts.empty()) fail("{}: {}attention.head_count_kv is an empty array", f.name(), a);
        c.n_kv_heads = *std::max_element(counts.begin(), counts.end());
        for (int64_t n : counts)
            if (c.n_kv_heads % n != 0)
                fail("{}: {}attention.head_count_kv mixes {} and {} KV heads; per-layer KV sizing needs each count to divide the largest",
                     f.name(), a, n, c.n_kv_heads);
    }
    read_experts(f, c, d);
    if (const auto* ff = f.find(a + "feed_forward_length"); ff && ff->as_array()) {
        // One width per block (Gemma 4's E2B/E4B double the FFN of their KV-sharing layers).
        const auto& items = ff->as_array()->items;
        if (int64_t(items.size()) != c.n_layers)
            fail("{}: {}feed_forward_length has {} entries for {} blocks ({}block_count)", f.name(), a, items.size(),
                 c.n_layers, a);
        for (size_t i = 0; i < items.size(); ++i) {
            const int64_t n = items[i].as_int().value_or(0);
            if (n <= 0 || n > (int64_t(1) << 24))
                fail("{}: {}feed_forward_length[{}] = {} is out of range", f.name(), a, i, n);
            c.layer_ffn_dims.push_back(n);
        }
        c.ffn_dim = *std::max_element(c.layer_ffn_dims.begin(), c.layer_ffn_dims.end());
    } else {
        c.ffn_dim = f.has(a + "feed_forward_length") || c.n_experts == 0 ? positive(a + "feed_forward_length")
                                                                         : c.expert_ffn_dim;
    }
    c.context_length = f.has(a + "context_length") ? positive(a + "context_length") : 2048;
    if (c.n_heads % c.n_kv_heads != 0)
        fail("{}: {} attention heads are not a multiple of {} KV heads", f.name(), c.n_heads, c.n_kv_heads);
    if (c.arch == "deepseek2") {
        read_mla(f, c, positive);
    } else if (f.has(a + "attention.key_length")) {
        c.head_dim = positive(a + "attention.key_length");
        int64_t vlen = f.has(a + "attention.value_length") ? positive(a + "attention.value_length") : c.head_dim;
        if (vlen != c.head_dim)
            fail("{}: key length {} differs from value length {}: not supported", f.name(), c.head_dim, vlen);
        // gemma4: sliding layers have their own head size; the paged KV rows hold the larger one.
        if (c.arch == "gemma4" && f.has(a + "attention.key_length_swa"))
            c.head_dim = std::max(c.head_dim, positive(a + "attention.key_length_swa"));
    } else {
        if (c.dim % c.n_heads != 0)
            fail("{}: embedding width {} is not a multiple of {} heads", f.name(), c.dim, c.n_heads);
        c.head_dim = c.dim / c.n_heads;
    }
    if (c.arch == "glm4moe") read_moe_layout(f, c, false);
    if (c.arch == "qwen35" || c.arch == "qwen35moe" || c.arch == "qwen3next") {  // trailing NextN (MTP) blocks: stored, not run
        c.nextn_layers = f.get_int_or(a + "nextn_predict_layers", 0);
        if (c.nextn_layers < 0 || c.nextn_layers >= c.n_layers)
            fail("{}: {}nextn_predict_layers = {} must be 0..{} (below the block count)", f.name(), a, c.nextn_layers,
                 c.n_layers - 1);
        c.n_layers -= c.nextn_layers;
        if (c.nextn_layers > 0)
            log_info("{}: {} trailing NextN (multi-token prediction) block(s) stored but not run", f.name(), c.nextn_layers);
    }
    if (c.arch == "qwen3vl") {
        c.n_deepstack_layers = f.get_int_or(a + "n_deepstack_layers", 0);
        if (c.n_deepstack_layers < 0 || c.n_deepstack_layers >= c.n_layers)
            fail("{}: {}n_deepstack_layers = {} must be 0..{} (below the block count)", f.name(), a,
                 c.n_deepstack_layers, c.n_layers - 1);
    }
    if (c.arch == "glm4" || c.arch == "glm4moe") {
        // GLM-4.xV's multimodal RoPE (sections per position axis) and GLM-OCR's NextN block on glm4.
        if (const auto* v = f.find(a + "rope.dimension_sections"); v && v->as_array())
            for (const auto& item : v->as_array()->items)
                if (item.as_int().value_or(0) != 0)
                    fail("{}: {}rope.dimension_sections (GLM-4.xV's multimodal RoPE) is not supported", f.name(), a);
        if (c.arch == "glm4" && f.get_int_or(a + "nextn_predict_layers", 0) != 0)
            fail("{}: {}nextn_predict_layers (GLM-OCR's NextN block) is not supported for glm4", f.name(), a);
    }
    c.rms_eps = float(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
    const bool encoder = d.kind == arch::Kind::encoder;
    c.norm_eps = float(f.get_float_or(a + "attention.layer_norm_epsilon", encoder ? 1e-12 : 1e-5));
    if (!(c.norm_eps > 0 && c.norm_eps < 1)) fail("{}: LayerNorm epsilon {} is out of range", f.name(), c.norm_eps);
    c.causal = f.get_bool_or(a + "attention.causal", !encoder);
    if (!(c.rms_eps > 0 && c.rms_eps < 1)) fail("{}: RMS norm epsilon {} is out of range", f.name(), c.rms_eps);
    c.rope_theta = float(f.get_float_or(a + "rope.freq_base", 10000.0));
    if (!(c.rope_theta > 1)) fail("{}: RoPE base {} is out of range", f.name(), c.rope_theta);
    if (c.arch != "deepseek2")
        c.rope_dims = f.has(a + "rope.dimension_count") ? positive(a + "rope.dimension_count") : c.head_dim;
    if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
        fail("{}: RoPE dimension count {} must be even and at most the head size {}", f.name(), c.rope_dims,
             c.head_dim);
    std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
    double factor = f.get_float_or(a + "rope.scaling.factor", 0.0);
    if (f.has(a + "rope.scale_linear")) {  // older files
        scaling = "linear";
        factor = f.get_float(a + "rope.scale_linear");
    }
    if (scaling == "linear") {
        if (!(factor > 0)) fail("{}: linear RoPE scaling factor {} is out of range", f.name(), factor);
        c.rope_linear_scale = float(factor);
    } else if (scaling != "none" && d.allows_rope_scaling(scaling)) {
        // llama3 and yarn: the builder computes the frequencies (rope_frequencies.h); longrope: the
        // factors are tensors (phi3_rope.h)
        c.rope_scaling = scaling;
    } else if (scaling != "none") {
        std::string more;
        for (std::string_view s : d.rope_scalings) more += fmt::format(", {}", s);
        fail("{}: RoPE scaling type '{}' is not supported for {} (supported: none, linear{})", f.name(), scaling,
             c.arch, more);
    }
    c.rope_style = d.rope == arch::Rope::neox ? RopeStyle::neox : RopeStyle::normal;
    c.qkv_bias = d.qkv_bias == arch::Has::yes;
    const auto* embd = f.find_tensor("token_embd.weight");
    if (!embd) fail("{}: tensor token_embd.weight is missing", f.name());
    if (embd->shape.size() != 2) fail("{}: token_embd.weight must be 2-D", f.name());
    c.vocab_size = embd->shape[1];
    return c;
}

}  // namespace pagoda::model
