// hf_config_json: the config.json a GGUF model's metadata stands for — the inverse of
// read_hf_config, so a folder written from a GGUF loads back to the same metadata.
#include <nlohmann/json.hpp>

#include "arch/arch_description.h"
#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_deepseek.h"
#include "hf/hf_gemma4.h"
#include "hf/hf_gpt_oss.h"
#include "hf/hf_qwen35.h"
#include "hf/hf_encoder_config.h"

namespace pagoda::hf {

using Json = nlohmann::json;

namespace {

// Which layers slide, by the rule the builders apply to {arch}.attention.sliding_window_pattern
// (an array of bools, or a period P: layer i slides unless i % P == P - 1; absent: the default).
std::vector<bool> sliding_layers(const gguf::File& f, const std::string& a, int64_t n_layers, int64_t default_period) {
    std::vector<bool> out(static_cast<size_t>(n_layers), false);
    const std::string key = a + ".attention.sliding_window_pattern";
    const gguf::Value* v = f.find(key);
    if (v && v->as_array()) {
        const auto& items = v->as_array()->items;
        if (int64_t(items.size()) != n_layers) fail("{}: {} has {} entries for {} layers", f.name(), key, items.size(), n_layers);
        for (int64_t i = 0; i < n_layers; ++i) {
            const gguf::Value& item = items[size_t(i)];
            out[size_t(i)] = item.type == gguf::ValueType::boolean ? std::get<bool>(item.data) : item.as_int().value_or(0) != 0;
        }
        return out;
    }
    const int64_t period = v ? f.get_int(key) : default_period;
    for (int64_t i = 0; i < n_layers; ++i) out[size_t(i)] = period == 0 || i % period < period - 1;
    return out;
}

// MiniMaxM2Config's names for what MiniMaxM2Model's converter reads back; the metadata that
// config.json cannot state (a separate dense FFN width, unnormalised or scaled expert weights, no
// selection bias) is refused rather than dropped.
void write_minimax_m2_config(const gguf::File& f, Json& j) {
    const std::string a = "minimax-m2.";
    const int64_t ffn = f.get_int(a + "feed_forward_length");
    if (f.get_int_or(a + "expert_feed_forward_length", ffn) != ffn)
        fail("{}: {}expert_feed_forward_length differs from feed_forward_length, which MiniMaxM2Config cannot say", f.name(), a);
    const int64_t gating = f.get_int_or(a + "expert_gating_func", 2);
    if (gating != 1 && gating != 2) fail("{}: {}expert_gating_func {} has no MiniMaxM2Config form", f.name(), a, gating);
    if (!f.get_bool_or(a + "expert_weights_norm", true) || f.get_float_or(a + "expert_weights_scale", 1.0) != 1.0)
        fail("{}: unnormalised or scaled expert weights have no MiniMaxM2Config form", f.name());
    if (!f.find_tensor("blk.0.exp_probs_b.bias")) fail("{}: tensor blk.0.exp_probs_b.bias is missing", f.name());
    const int64_t n_layers = f.get_int(a + "block_count");
    j["num_local_experts"] = f.get_int(a + "expert_count");
    j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
    j["scoring_func"] = gating == 2 ? "sigmoid" : "softmax";
    j["use_routing_bias"] = true;
    j["use_qk_norm"] = true;
    j["qk_norm_type"] = "per_layer";
    j["shared_intermediate_size"] = 0;
    j["attn_type_list"] = std::vector<int>(size_t(n_layers), 1);
    j["use_mtp"] = false;
}

}  // namespace

std::string hf_config_json(const gguf::File& f, const std::string& torch_dtype, const std::vector<float>& short_factors,
                           const std::vector<float>& long_factors) {
    const std::string arch = f.get_string("general.architecture");
    const arch::ArchDescription* d = arch::find_architecture(arch);
    if (d && d->kind == arch::Kind::encoder) return hf_encoder_config_json(f, torch_dtype, "");
    if (arch == "gemma4") return gemma4_config_json(f, torch_dtype);
    const std::string a = arch + ".";
    const int64_t n_experts = f.get_int_or(a + "expert_count", 0);
    Json j;
    // The description's main class, or its experts class for a model with experts (llama: Mixtral).
    const arch::HfClass* cls = nullptr;
    for (const arch::HfClass& c : d ? d->hf_classes : std::span<const arch::HfClass>{})
        if (c.role == arch::HfRole::main ? !cls : c.role == arch::HfRole::experts && n_experts > 0) cls = &c;
    if (!cls) fail("{}: architecture '{}' has no Hugging Face form here", f.name(), arch);
    const std::string hf_arch(cls->name), model_type(cls->model_type);
    j["architectures"] = {hf_arch};
    j["model_type"] = model_type;
    j["_name_or_path"] = f.get_string_or("general.name", "");
    const int64_t dim = f.get_int(a + "embedding_length"), heads = f.get_int(a + "attention.head_count");
    const int64_t n_layers = f.get_int(a + "block_count");
    j["hidden_size"] = dim;
    j["num_hidden_layers"] = n_layers;
    j["num_attention_heads"] = heads;
    j["num_key_value_heads"] = f.get_int_or(a + "attention.head_count_kv", heads);
    const int64_t head_dim = f.get_int_or(a + "attention.key_length", dim / heads);
    j["head_dim"] = head_dim;  // always: Gemma 3's config defaults it to 256 when absent
    j["max_position_embeddings"] = f.get_int_or(a + "context_length", 2048);
    j["rms_norm_eps"] = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
    j["rope_theta"] = f.get_float_or(a + "rope.freq_base", 10000.0);
    j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
    j["torch_dtype"] = torch_dtype;
    if (const auto* e = f.find_tensor("token_embd.weight")) j["vocab_size"] = e->shape.size() == 2 ? e->shape[1] : 0;
    const int64_t ffn = f.get_int(a + "feed_forward_length");
    j["intermediate_size"] = ffn;
    const bool glm = arch == "glm4" || arch == "glm4moe";
    if (arch == "glm4moe") {  // Glm4MoeConfig's names
        if (f.get_int_or(a + "nextn_predict_layers", 0) > 0)
            fail("{}: NextN blocks have no Hugging Face form here (write the model without them)", f.name());
        if (f.get_int_or(a + "expert_gating_func", 2) != 2)
            fail("{}: {}expert_gating_func other than sigmoid has no Glm4MoeConfig form", f.name(), a);
        j["n_routed_experts"] = n_experts;
        j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
        j["moe_intermediate_size"] = f.get_int(a + "expert_feed_forward_length");
        j["n_shared_experts"] = f.get_int_or(a + "expert_shared_count", 0);
        j["first_k_dense_replace"] = f.get_int_or(a + "leading_dense_block_count", 0);
        j["routed_scaling_factor"] = f.get_float_or(a + "expert_weights_scale", 1.0);
        j["norm_topk_prob"] = f.get_bool_or(a + "expert_weights_norm", false);
        j["num_nextn_predict_layers"] = 0;
        j["use_qk_norm"] = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    }
    const bool minimax = arch == "minimax-m2";
    if (minimax) write_minimax_m2_config(f, j);
    const bool deepseek = arch == "deepseek2";
    if (deepseek) write_deepseek2_config(f, j);
    const bool gpt_oss = arch == "gpt-oss";
    if (gpt_oss) {
        write_gpt_oss_config(f, j);
        std::vector<std::string> types;
        for (bool s : sliding_layers(f, arch, n_layers, 2)) types.push_back(s ? "sliding_attention" : "full_attention");
        j["layer_types"] = types;
    }
    if (glm) j["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    const bool qwen35 = arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next";
    if (n_experts > 0 && arch != "glm4moe" && !qwen35 && !minimax && !deepseek && !gpt_oss) {
        j[arch == "llama" ? "num_local_experts" : "num_experts"] = n_experts;
        j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
        if (arch != "llama") {
            j["moe_intermediate_size"] = f.get_int(a + "expert_feed_forward_length");
            j["decoder_sparse_step"] = 1;
            j["norm_topk_prob"] = f.get_bool_or(a + "expert_weights_norm", arch == "qwen3moe");
        }
        if (arch == "qwen2moe") j["shared_expert_intermediate_size"] = f.get_int(a + "expert_shared_feed_forward_length");
    }
    if (arch == "qwen2" || arch == "qwen2moe") j["use_sliding_window"] = false;
    if (arch == "smollm3") {  // every 4th layer without RoPE, as llama.cpp's smollm3 computes
        std::vector<int> no_rope;
        for (int64_t i = 0; i < n_layers; ++i) no_rope.push_back((i + 1) % 4 != 0 ? 1 : 0);
        j["no_rope_layers"] = no_rope;
        j["no_rope_layer_interval"] = 4;
    }
    const int64_t rope_dims = f.get_int_or(a + "rope.dimension_count", head_dim);
    if (glm) j["partial_rotary_factor"] = double(rope_dims) / double(head_dim);
    if (qwen35) write_qwen35_config(f, j);
    if (minimax) j["rotary_dim"] = rope_dims;
    if (rope_dims != head_dim && arch != "phi3" && !glm && !qwen35 && !minimax && !deepseek)
        fail("{}: {}rope.dimension_count {} differs from the head size {}, which config.json cannot say for {}", f.name(), a,
             rope_dims, head_dim, arch);

    const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
    if (scaling == "llama3") {
        j["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", f.get_float(a + "rope.scaling.factor")},
                             {"low_freq_factor", f.get_float(a + "rope.scaling.low_freq_factor")},
                             {"high_freq_factor", f.get_float(a + "rope.scaling.high_freq_factor")},
                             {"original_max_position_embeddings", f.get_int(a + "rope.scaling.original_context_length")}};
    } else if (scaling == "linear") {
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", f.get_float(a + "rope.scaling.factor")}};
    } else if (scaling != "none" && !deepseek && !gpt_oss) {  // their yarn: write_deepseek2_config / write_gpt_oss_config
        fail("{}: RoPE scaling '{}' has no config.json form here", f.name(), scaling);
    }
    if (f.find_tensor("rope_freqs.weight") && scaling != "llama3")
        fail("{}: tensor rope_freqs.weight has no config.json form (write the llama.rope.scaling.* keys instead)", f.name());

    if (arch == "gemma2" || arch == "gemma3") {
        const int64_t layers_27b = arch == "gemma2" ? 46 : 62;
        j["query_pre_attn_scalar"] = n_layers == layers_27b ? dim / heads : head_dim;
        const int64_t window = f.get_int_or(a + "attention.sliding_window", arch == "gemma2" ? 4096 : 0);
        if (window > 0) {
            j["sliding_window"] = window;
            std::vector<std::string> types;
            for (bool s : sliding_layers(f, arch, n_layers, arch == "gemma2" ? 2 : 6))
                types.push_back(s ? "sliding_attention" : "full_attention");
            j["layer_types"] = types;
        }
        if (arch == "gemma2") {
            if (f.has(a + "attn_logit_softcapping")) j["attn_logit_softcapping"] = f.get_float(a + "attn_logit_softcapping");
            if (f.has(a + "final_logit_softcapping")) j["final_logit_softcapping"] = f.get_float(a + "final_logit_softcapping");
        } else {
            j["rope_local_base_freq"] = f.get_float_or(a + "rope.freq_base_swa", 10000.0);
        }
    }
    if (arch == "phi3") {
        if (rope_dims != head_dim) j["partial_rotary_factor"] = double(rope_dims) / double(head_dim);
        if (f.has(a + "attention.sliding_window")) {
            for (bool s : sliding_layers(f, arch, n_layers, 0))
                if (!s) fail("{}: phi3 with non-sliding layers has no config.json form", f.name());
            j["sliding_window"] = f.get_int(a + "attention.sliding_window");
        }
        j["original_max_position_embeddings"] =
            f.get_int_or(a + "rope.scaling.original_context_length", f.get_int_or(a + "context_length", 2048));
        if (!short_factors.empty() || !long_factors.empty())
            j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_factors}, {"long_factor", long_factors}};
    }
    return j.dump(2) + "\n";
}

}  // namespace pagoda::hf
