#include "hf/hf_config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "arch/arch_description.h"
#include "core/error.h"
#include "hf/config_reader.h"
#include "hf/hf_deepseek.h"
#include "hf/hf_gemma4.h"
#include "hf/hf_gpt_oss.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_qwen35.h"

namespace pagoda::hf {
namespace {

using gguf::Value;
using Json = nlohmann::json;
using detail::Config;

// The decoder classes of every architecture's description (arch/arch_description.h).
std::string supported_list() {
    std::string s;
    for (const arch::ArchDescription& d : arch::architectures())
        for (const arch::HfClass& c : d.hf_classes) s += (s.empty() ? "" : ", ") + std::string(c.name);
    return s;
}

class Meta {
public:
    explicit Meta(std::vector<std::pair<std::string, Value>>& out, std::string arch) : out_(out), a_(std::move(arch) + ".") {}
    void set(const std::string& key, Value v) { out_.emplace_back(key, std::move(v)); }
    void u32(const std::string& key, int64_t v) { set(a_ + key, Value::u32(uint32_t(v))); }
    void f32(const std::string& key, double v) { set(a_ + key, Value::f32(float(v))); }

private:
    std::vector<std::pair<std::string, Value>>& out_;
    std::string a_;
};

// Gemma3TextConfig's defaults: the text_config of a Gemma3ForConditionalGeneration config.json
// leaves out the keys that keep them.
const Json& gemma3_defaults() {
    static const Json d = {{"num_attention_heads", 8},     {"num_key_value_heads", 4},   {"head_dim", 256},
                           {"rms_norm_eps", 1e-6},          {"rope_theta", 1000000.0},    {"rope_local_base_freq", 10000.0},
                           {"max_position_embeddings", 131072}, {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},
                           {"sliding_window_pattern", 6}};
    return d;
}

void rope_scaling(const Config& c, const HfModel& m, const arch::ArchDescription& d, Meta& meta) {
    if (!c.has("rope_scaling")) return;
    const Config rs = c.object("rope_scaling");
    const std::string type = rs.has("rope_type") ? rs.string_or("rope_type", "") : rs.string_or("type", "default");
    if (type == "default") return;
    if (type == "linear") {
        meta.set(m.arch + ".rope.scaling.type", Value::string("linear"));
        meta.f32("rope.scaling.factor", rs.number("factor"));
        return;
    }
    if (type == "llama3" && d.allows_rope_scaling("llama3")) {
        meta.set(m.arch + ".rope.scaling.type", Value::string("llama3"));
        meta.f32("rope.scaling.factor", rs.number("factor"));
        meta.f32("rope.scaling.low_freq_factor", rs.number("low_freq_factor"));
        meta.f32("rope.scaling.high_freq_factor", rs.number("high_freq_factor"));
        meta.u32("rope.scaling.original_context_length", rs.positive("original_max_position_embeddings"));
        return;
    }
    if ((type == "longrope" || type == "su") && d.allows_rope_scaling("longrope")) return;  // read by the phi3 branch
    if (type == "yarn" && (m.arch == "deepseek2" || m.arch == "gpt-oss")) return;  // read by their branches
    c.refuse("rope_scaling", "has type '" + type + "', which pagoda does not implement for " + m.hf_arch);
}

// MiniMax-M2 / M2.1: every layer routed experts under block_sparse_moe (Mixtral's names) whose
// intermediate_size is the expert width, a sigmoid (or softmax) router with its selection bias, and
// Q/K RMSNorms over the whole projected rows. What the builder does not compute is refused.
void read_minimax_m2_config(const Config& c, HfModel& m, Meta& meta) {
    m.mixtral_names = true;
    m.n_experts = c.positive("num_local_experts");
    const int64_t ffn = c.positive("intermediate_size");
    meta.u32("feed_forward_length", ffn);
    meta.u32("expert_feed_forward_length", ffn);
    meta.u32("expert_count", m.n_experts);
    meta.u32("expert_used_count", c.positive("num_experts_per_tok"));
    const std::string scoring = c.string_or("scoring_func", "sigmoid");
    if (scoring != "sigmoid" && scoring != "softmax") c.refuse("scoring_func", "is '" + scoring + "' (expected sigmoid or softmax)");
    meta.u32("expert_gating_func", scoring == "sigmoid" ? 2 : 1);
    if (!c.boolean_or("use_routing_bias", true))
        c.refuse("use_routing_bias", "is false, but pagoda's minimax-m2 builder (as llama.cpp's) needs e_score_correction_bias");
    if (!c.boolean_or("use_qk_norm", true)) c.refuse("use_qk_norm", "is false, but pagoda's minimax-m2 builder always applies Q/K norms");
    if (c.string_or("qk_norm_type", "per_layer") != "per_layer")
        c.refuse("qk_norm_type", "is not per_layer (one RMSNorm over the whole Q and K rows), the only form pagoda computes");
    if (c.has("shared_intermediate_size") && c.integer("shared_intermediate_size") != 0)
        c.refuse("shared_intermediate_size", "is not 0, but pagoda's minimax-m2 builder has no shared expert");
    if (c.number_or("routed_scaling_factor", 1.0) != 1.0)
        c.refuse("routed_scaling_factor", "is not 1, but MiniMax-M2's router (and pagoda's) does not scale the expert weights");
    if (c.has("attn_type_list")) {  // 1: full attention in every layer (0 would be MiniMax-01's linear attention)
        const Json& t = c.at("attn_type_list");
        if (!t.is_array() || int64_t(t.size()) != m.n_layers) c.refuse("attn_type_list", "is not one entry per layer");
        for (const Json& v : t)
            if (!v.is_number_integer() || v.get<int64_t>() != 1)
                c.refuse("attn_type_list", "holds " + v.dump() + ": pagoda's minimax-m2 builder has full attention (1) only");
    }
}

}  // namespace

HfModel read_hf_config(std::string_view json_text, const std::string& name) {
    Json root;
    try {
        root = Json::parse(json_text);
    } catch (const Json::exception& e) {
        fail("{}: not valid JSON ({})", name, e.what());
    }
    if (!root.is_object()) fail("{}: not a JSON object", name);
    const Config top(root, name, "");
    HfModel m;
    if (top.has("architectures")) {
        const Json& a = top.at("architectures");
        if (!a.is_array() || a.empty() || !a[0].is_string()) top.refuse("architectures", "is not a list of names");
        m.hf_arch = a[0].get<std::string>();
    } else {
        top.refuse("architectures", "is missing (it names the model class, e.g. LlamaForCausalLM)");
    }
    if (is_encoder_class(m.hf_arch)) return read_hf_encoder_config(root, name, m.hf_arch);
    const arch::HfClass* cls = nullptr;
    const arch::ArchDescription* desc = arch::find_hf_class(m.hf_arch, &cls);
    if (!desc)
        fail("{}: architectures[0] '{}' is not supported (supported: {}, {})", name, m.hf_arch, supported_list(),
             encoder_class_list());
    const arch::ArchDescription& d = *desc;
    m.arch = d.name;
    if (m.arch == "gemma4") return read_gemma4_config(root, name, m.hf_arch, cls->role == arch::HfRole::multimodal);

    // Gemma3ForConditionalGeneration: the decoder's config is text_config, with Gemma3's defaults.
    Json text = root;
    std::string scope;
    const bool qwen35 = m.arch == "qwen35" || m.arch == "qwen35moe" || m.arch == "qwen3next";  // and its predecessor
    if (cls->role == arch::HfRole::multimodal) {
        if (!root.contains("text_config") || !root["text_config"].is_object())
            top.refuse("text_config", "is missing (" + m.hf_arch + " keeps the decoder's config there)");
        text = root["text_config"];
        scope = "text_config.";
    }
    if (m.arch == "gemma3")
        for (const auto& [k, v] : gemma3_defaults().items())
            if (!text.contains(k)) text[k] = v;
    const Config c(text, name, scope);

    const std::string a = m.arch;
    Meta meta(m.metadata, a);
    meta.set("general.architecture", Value::string(a));
    meta.set("general.name", Value::string(root.value("_name_or_path", std::string())));
    m.n_layers = c.positive("num_hidden_layers");
    const int64_t dim = c.positive("hidden_size");
    m.n_heads = c.positive("num_attention_heads");
    m.n_kv_heads = c.positive_or("num_key_value_heads", m.n_heads);
    m.head_dim = c.has("head_dim") ? c.positive("head_dim") : dim / m.n_heads;
    const bool deepseek = m.arch == "deepseek2";  // its head sizes are read_deepseek2_config's
    if (!c.has("head_dim") && dim % m.n_heads && !deepseek) c.refuse("hidden_size", "is not a multiple of num_attention_heads");
    meta.u32("context_length", c.positive("max_position_embeddings"));
    meta.u32("embedding_length", dim);
    meta.u32("block_count", m.n_layers);
    meta.u32("attention.head_count", m.n_heads);
    meta.u32("attention.head_count_kv", deepseek ? 1 : m.n_kv_heads);  // MLA: one latent KV head
    if (c.has("head_dim") && !deepseek) {
        meta.u32("attention.key_length", m.head_dim);
        meta.u32("attention.value_length", m.head_dim);
    }
    meta.f32("attention.layer_norm_rms_epsilon", c.number("rms_norm_eps"));
    m.prefixes = {"model."};
    m.head_names = {"lm_head.weight"};
    const Qwen35Rope q35 = qwen35 ? read_qwen35_config(c, m) : Qwen35Rope{m.head_dim, c.number_or("rope_theta", 10000.0)};
    meta.f32("rope.freq_base", q35.theta);
    int64_t rope_dims = q35.dims;
    const bool glm = m.arch == "glm4" || m.arch == "glm4moe";
    if ((m.arch == "phi3" && c.has("partial_rotary_factor")) || glm) {
        // GLM rotates half of each head unless the config says otherwise (the converter's default).
        const double f = c.number_or("partial_rotary_factor", 0.5);
        if (!(f > 0 && f <= 1)) c.refuse("partial_rotary_factor", "must be in (0, 1]");
        rope_dims = int64_t(double(m.head_dim) * f);
    }
    if (m.arch == "minimax-m2") {  // rotary_dim: the leading dims of each head that rotate
        rope_dims = c.positive("rotary_dim");
        if (rope_dims > m.head_dim || rope_dims % 2) c.refuse("rotary_dim", "must be even and at most head_dim");
    }
    if (deepseek) rope_dims = c.positive("qk_rope_head_dim");
    meta.u32("rope.dimension_count", rope_dims);
    m.tied = top.boolean_or("tie_word_embeddings", m.arch == "gemma2" || m.arch == "gemma3") ||
             c.boolean_or("tie_word_embeddings", false);
    if (m.hf_arch == "Gemma3ForConditionalGeneration") {
        m.prefixes = {"language_model.model.", "model.language_model."};
        m.head_names = {"language_model.lm_head.weight", "lm_head.weight"};
        m.skipped_prefixes = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."};
    }
    // Biases the builders do not read would be silently dropped: refuse them instead. Q/K/V biases
    // are the description's; no decoder builder reads MLP biases.
    if (c.boolean_or("attention_bias", false) && d.qkv_bias == arch::Has::no)
        c.refuse("attention_bias", "is true, but pagoda's " + m.arch + " builder has no such biases");
    if (c.boolean_or("mlp_bias", false)) c.refuse("mlp_bias", "is true, but pagoda's " + m.arch + " builder has no such biases");

    const bool llama = m.arch == "llama", gemma = m.arch == "gemma2" || m.arch == "gemma3";
    // llama.cpp's converter permutes these rows (llama, and smollm3 through the same converter class);
    // NEOX-RoPE families keep them.
    m.permute_qk = llama || m.arch == "smollm3";
    if (m.arch == "smollm3") {
        // no_rope_layers[i] is 1 where layer i rotates: llama.cpp fixes the NoPE period at 4 (the
        // builder's), so any other list would be computed wrongly.
        if (c.has("no_rope_layers")) {
            const Json& nr = c.at("no_rope_layers");
            if (!nr.is_array() || int64_t(nr.size()) != m.n_layers) c.refuse("no_rope_layers", "is not one entry per layer");
            for (int64_t i = 0; i < m.n_layers; ++i)
                if (!nr[size_t(i)].is_number_integer() || nr[size_t(i)].get<int64_t>() != ((i + 1) % 4 != 0 ? 1 : 0))
                    c.refuse("no_rope_layers", "differs from every 4th layer without RoPE, the only pattern llama.cpp's "
                                               "smollm3 (and pagoda's) computes");
        } else if (c.positive_or("no_rope_layer_interval", 4) != 4) {
            c.refuse("no_rope_layer_interval", "is not 4, the only NoPE period llama.cpp's smollm3 computes");
        }
    }
    m.norm_plus_one = gemma || qwen35;
    if (!c.has("intermediate_size") && m.arch != "qwen3moe" && m.arch != "qwen35moe" && m.arch != "qwen3next")
        c.at("intermediate_size");
    if (m.hf_arch == "MixtralForCausalLM") {
        m.mixtral_names = true;
        m.n_experts = c.positive("num_local_experts");
        meta.u32("feed_forward_length", c.positive("intermediate_size"));
        meta.u32("expert_count", m.n_experts);
        meta.u32("expert_used_count", c.positive("num_experts_per_tok"));
    } else if (m.arch == "qwen2moe" || m.arch == "qwen3moe" || m.arch == "qwen35moe" || m.arch == "qwen3next") {
        m.n_experts = c.positive("num_experts");
        meta.u32("feed_forward_length", c.positive_or("intermediate_size", c.positive("moe_intermediate_size")));
        meta.u32("expert_count", m.n_experts);
        meta.u32("expert_used_count", c.positive("num_experts_per_tok"));
        meta.u32("expert_feed_forward_length", c.positive("moe_intermediate_size"));
        if (m.arch == "qwen2moe" || m.arch == "qwen35moe" || m.arch == "qwen3next") meta.u32("expert_shared_feed_forward_length", c.positive("shared_expert_intermediate_size"));
        if (c.has("norm_topk_prob")) meta.set(a + ".expert_weights_norm", Value::boolean(c.boolean_or("norm_topk_prob", false)));
        if (c.positive_or("decoder_sparse_step", 1) != 1) c.refuse("decoder_sparse_step", "is not 1: pagoda's MoE builders expect every layer sparse");
        if (c.has("mlp_only_layers") && !c.at("mlp_only_layers").empty())
            c.refuse("mlp_only_layers", "lists dense layers: pagoda's MoE builders expect every layer sparse");
    } else if (m.arch == "glm4moe") {  // as Glm4MoeModel converts it
        m.n_experts = c.positive("n_routed_experts");
        meta.u32("feed_forward_length", c.positive("intermediate_size"));
        meta.u32("expert_count", m.n_experts);
        meta.u32("expert_used_count", c.positive("num_experts_per_tok"));
        meta.u32("expert_feed_forward_length", c.positive("moe_intermediate_size"));
        const auto count = [&](const char* key) {  // 0 allowed
            const int64_t v = c.has(key) ? c.integer(key) : 0;
            if (v < 0 || v > m.n_layers + 1024) c.refuse(key, "is out of range");
            return v;
        };
        meta.u32("expert_shared_count", count("n_shared_experts"));
        const int64_t dense = count("first_k_dense_replace");
        if (dense > m.n_layers) c.refuse("first_k_dense_replace", "exceeds num_hidden_layers");
        meta.u32("leading_dense_block_count", dense);
        meta.u32("expert_gating_func", 2);  // sigmoid
        meta.f32("expert_weights_scale", c.number_or("routed_scaling_factor", 1.0));
        meta.set(a + ".expert_weights_norm", Value::boolean(c.boolean_or("norm_topk_prob", false)));
        m.nextn_layers = count("num_nextn_predict_layers");  // hf_folder logs that they are not loaded
    } else if (m.arch == "minimax-m2") {  // as MiniMaxM2Model converts it
        read_minimax_m2_config(c, m, meta);
    } else if (deepseek) {  // as DeepseekV2Model converts it
        read_deepseek2_config(c, m);
    } else if (m.arch == "gpt-oss") {  // as GptOssModel converts it
        read_gpt_oss_config(c, m);
    } else {
        meta.u32("feed_forward_length", c.positive("intermediate_size"));
    }
    if (m.n_experts > 0 && c.positive("num_experts_per_tok") > m.n_experts)
        c.refuse("num_experts_per_tok", "is larger than the expert count");

    rope_scaling(c, m, d, meta);
    if ((m.arch == "qwen2" || m.arch == "qwen2moe" || m.arch == "qwen3" || m.arch == "qwen3moe") &&
        c.boolean_or("use_sliding_window", false))
        c.refuse("use_sliding_window", "is true, but pagoda's " + m.arch + " builder has no sliding window");

    if (gemma) {
        // pagoda scales queries as llama.cpp does: 1/sqrt(head_dim), or 1/sqrt(dim/heads) for the 27B
        // models (46 layers for gemma2, 62 for gemma3); any other query_pre_attn_scalar would be ignored.
        const int64_t layers_27b = m.arch == "gemma2" ? 46 : 62;
        const int64_t expected = m.n_layers == layers_27b ? dim / m.n_heads : m.head_dim;
        if (c.has("query_pre_attn_scalar") && c.number("query_pre_attn_scalar") != double(expected))
            c.refuse("query_pre_attn_scalar", "is " + std::to_string(c.number("query_pre_attn_scalar")) +
                                                  ", pagoda scales queries by 1/sqrt(" + std::to_string(expected) + ") here");
        if (c.has("sliding_window")) meta.u32("attention.sliding_window", c.positive("sliding_window"));
        if (m.arch == "gemma2") {
            if (c.has("attn_logit_softcapping")) meta.f32("attn_logit_softcapping", c.number("attn_logit_softcapping"));
            if (c.has("final_logit_softcapping")) meta.f32("final_logit_softcapping", c.number("final_logit_softcapping"));
        } else {
            for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"})
                if (c.has(cap)) c.refuse(cap, "is set, but pagoda's gemma3 builder has no soft caps");
            meta.f32("rope.freq_base_swa", c.number_or("rope_local_base_freq", 10000.0));
        }
    }
    if (m.arch == "phi3" && c.has("sliding_window")) meta.u32("attention.sliding_window", c.positive("sliding_window"));
    // Which layers slide: layer_types (newer configs) else gemma3's sliding_window_pattern period.
    if (c.has("layer_types") && !qwen35) {  // qwen35's (linear / full attention) are read above
        const Json& lt = c.at("layer_types");
        if (!lt.is_array() || int64_t(lt.size()) != m.n_layers) c.refuse("layer_types", "is not one entry per layer");
        std::vector<Value> sliding;
        for (const Json& t : lt) {
            const std::string s = t.is_string() ? t.get<std::string>() : "";
            if (s != "sliding_attention" && s != "full_attention")
                c.refuse("layer_types", "holds '" + t.dump() + "' (expected sliding_attention or full_attention)");
            sliding.push_back(Value::boolean(s == "sliding_attention"));
        }
        const bool any_sliding = std::any_of(sliding.begin(), sliding.end(), [](const Value& v) { return std::get<bool>(v.data); });
        if (m.arch != "gemma2" && m.arch != "gemma3" && m.arch != "phi3" && m.arch != "gpt-oss") {
            if (any_sliding) c.refuse("layer_types", "names sliding layers, but pagoda's " + m.arch + " builder has no sliding window");
            sliding.clear();  // every layer full: nothing to write (SmolLM3's configs list them)
        }
        if (!sliding.empty()) meta.set(a + ".attention.sliding_window_pattern", Value::array(gguf::ValueType::boolean, std::move(sliding)));
    } else if (m.arch == "gemma3" && c.has("sliding_window_pattern")) {
        meta.u32("attention.sliding_window_pattern", c.positive("sliding_window_pattern"));
    }

    if (m.arch == "phi3") {
        const int64_t context = c.positive("max_position_embeddings");
        const int64_t original = c.positive_or("original_max_position_embeddings", context);
        meta.u32("rope.scaling.original_context_length", original);
        // The attention factor LongRoPE scales by, as llama.cpp's converter writes it (as f32).
        const double scale = double(context) / double(original);
        meta.f32("rope.scaling.attn_factor",
                 scale > 1 && original > 1 ? std::sqrt(1 + std::log(scale) / std::log(double(original))) : 1.0);
        if (c.has("rope_scaling")) {
            const Config rs = c.object("rope_scaling");
            for (const char* unsupported : {"short_mscale", "long_mscale"})
                if (rs.has(unsupported)) rs.refuse(unsupported, "is not implemented by pagoda's phi3 LongRoPE");
            m.rope_factors_short = rs.floats("short_factor");
            m.rope_factors_long = rs.floats("long_factor");
            for (const auto* f : {&m.rope_factors_short, &m.rope_factors_long})
                if (int64_t(f->size()) != rope_dims / 2)
                    rs.refuse(f == &m.rope_factors_short ? "short_factor" : "long_factor",
                              "has " + std::to_string(f->size()) + " entries, expected " + std::to_string(rope_dims / 2));
        }
    }
    return m;
}

}  // namespace pagoda::hf
