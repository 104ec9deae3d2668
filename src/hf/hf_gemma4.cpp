#include "hf/hf_gemma4.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <utility>

#include "arch/arch_description.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hf/config_reader.h"

namespace pagoda::hf {

using detail::Config;
using gguf::Value;
using gguf::ValueType;
using Json = nlohmann::json;

namespace {

constexpr const char* kArch = "gemma4";
constexpr float kUnrotated = 1e30f;  // the converter's rope_freqs factor for a frequency that does not rotate
// Bounds on what sizes per-layer lists and rope_freqs (a hostile config must not allocate gigabytes).
constexpr int64_t kMaxLayers = 4096, kMaxHeadDim = 1 << 16;

// Gemma4TextConfig's defaults for the keys a config.json (or a text_config) may leave out.
const Json& text_defaults() {
    static const Json d = {
        {"num_attention_heads", 8},
        {"num_key_value_heads", 4},
        {"head_dim", 256},
        {"global_head_dim", 512},
        {"rms_norm_eps", 1e-6},
        {"max_position_embeddings", 131072},
        {"sliding_window", 512},
        {"hidden_activation", "gelu_pytorch_tanh"},
        {"hidden_size_per_layer_input", 256},
        {"vocab_size_per_layer_input", 262144},
        {"vocab_size", 262144},
        {"rope_parameters",
         {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
          {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}}}};
    return d;
}

// A count that may be 0, at most `limit`.
int64_t count_of(const Config& c, const char* key, int64_t limit) {
    const int64_t v = c.has(key) ? c.integer(key) : 0;
    if (v < 0 || v > limit) c.refuse(key, "is out of range (0 to " + std::to_string(limit) + ")");
    return v;
}

Value u32s(const std::vector<int64_t>& v) {
    std::vector<Value> items;
    for (int64_t x : v) items.push_back(Value::u32(uint32_t(x)));
    return Value::array(ValueType::u32, std::move(items));
}

// The full layers' rope_parameters: "proportional" RoPE over global_head_dim, of which
// partial_rotary_factor rotates; the sliding layers' plain RoPE over all of head_dim.
void read_rope(const Config& c, int64_t hd_full, HfModel& m) {
    const std::string a = std::string(kArch) + ".";
    const Config rp = c.object("rope_parameters");
    const Config full = rp.object("full_attention"), swa = rp.object("sliding_attention");
    if (full.string_or("rope_type", "default") != "proportional")
        full.refuse("rope_type", "is not 'proportional', the full layers' RoPE llama.cpp's converter (and pagoda) runs");
    if (swa.string_or("rope_type", "default") != "default")
        swa.refuse("rope_type", "is not 'default', the sliding layers' RoPE pagoda runs");
    for (const Config* r : {&full, &swa})
        if (r->number_or("factor", 1.0) != 1.0) r->refuse("factor", "is not 1: pagoda's gemma4 has no RoPE scaling");
    // transformers rotates the whole sliding head (its default RoPE has no partial factor); the
    // converter would rotate partial_rotary_factor of it.
    if (swa.number_or("partial_rotary_factor", 1.0) != 1.0)
        swa.refuse("partial_rotary_factor", "is not 1: transformers rotates the whole sliding head");
    if (c.number_or("partial_rotary_factor", 1.0) != 1.0)
        c.refuse("partial_rotary_factor", "is not 1: llama.cpp's converter would rotate that part of the sliding heads, "
                                          "transformers all of each");
    const double factor = full.number_or("partial_rotary_factor", 1.0);
    if (!(factor > 0 && factor <= 1)) full.refuse("partial_rotary_factor", "must be in (0, 1]");
    const auto rotated = int64_t(double(hd_full) * factor / 2);  // as the converter truncates it
    if (rotated < 1) full.refuse("partial_rotary_factor", "rotates no frequency of the full layers' heads");
    m.rope_freqs.assign(size_t(hd_full / 2), kUnrotated);
    std::fill_n(m.rope_freqs.begin(), rotated, 1.0f);
    m.metadata.emplace_back(a + "rope.freq_base", Value::f32(float(full.number("rope_theta"))));
    m.metadata.emplace_back(a + "rope.freq_base_swa", Value::f32(float(swa.number("rope_theta"))));
}

}  // namespace

HfModel read_gemma4_config(const Json& root, const std::string& name, const std::string& hf_arch, bool multimodal) {
    const Config top(root, name, "");
    Json text = root;
    std::string scope;
    if (multimodal) {
        if (!root.contains("text_config") || !root["text_config"].is_object())
            top.refuse("text_config", "is missing (" + hf_arch + " keeps the decoder's config there)");
        text = root["text_config"];
        scope = "text_config.";
    }
    // Absent keys take the defaults; null ones mean "none" (no PLE, no soft cap, head_dim for the full
    // layers) except rope_parameters, which transformers then fills with the defaults too.
    for (const auto& [k, v] : text_defaults().items())
        if (!text.contains(k) || (k == "rope_parameters" && text[k].is_null())) text[k] = v;
    const Config c(text, name, scope);
    HfModel m;
    m.hf_arch = hf_arch;
    m.arch = kArch;
    const std::string a = m.arch + ".";
    auto u32 = [&](const std::string& key, int64_t v) { m.metadata.emplace_back(a + key, Value::u32(uint32_t(v))); };
    m.metadata.emplace_back("general.architecture", Value::string(m.arch));
    m.metadata.emplace_back("general.name", Value::string(root.value("_name_or_path", std::string())));

    const int64_t n = m.n_layers = c.positive("num_hidden_layers");
    if (n > kMaxLayers) c.refuse("num_hidden_layers", "is out of range (at most " + std::to_string(kMaxLayers) + ")");
    m.n_heads = c.positive("num_attention_heads");
    m.n_kv_heads = c.positive("num_key_value_heads");
    // global_head_dim null: the full layers keep head_dim (transformers' fallback); absent: the default 512.
    const int64_t hd = m.head_dim = c.positive("head_dim");
    const int64_t hd_full = c.has("global_head_dim") ? c.positive("global_head_dim") : hd;
    for (const auto& [key, v] : {std::pair{"head_dim", hd}, std::pair{"global_head_dim", hd_full}}) {
        if (v % 2) c.refuse(key, "is odd (RoPE rotates pairs)");
        if (v > kMaxHeadDim) c.refuse(key, "is out of range (at most " + std::to_string(kMaxHeadDim) + ")");
    }
    u32("context_length", c.positive("max_position_embeddings"));
    u32("embedding_length", c.positive("hidden_size"));
    u32("block_count", n);
    u32("attention.head_count", m.n_heads);
    m.metadata.emplace_back(a + "attention.layer_norm_rms_epsilon", Value::f32(float(c.number("rms_norm_eps"))));
    u32("attention.key_length", hd_full);
    u32("attention.value_length", hd_full);
    u32("attention.key_length_swa", hd);
    u32("attention.value_length_swa", hd);
    u32("rope.dimension_count", hd_full);  // proportional: rope_freqs leaves the rest unrotated
    u32("rope.dimension_count_swa", hd);
    read_rope(c, hd_full, m);
    u32("attention.sliding_window", c.positive("sliding_window"));

    // Which layers slide: layer_types, else Gemma4TextConfig's default (every 6th layer full).
    std::vector<bool> sliding(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = (i + 1) % 6 != 0;
    if (c.has("layer_types")) {
        const Json& lt = c.at("layer_types");
        if (!lt.is_array() || int64_t(lt.size()) != n) c.refuse("layer_types", "is not one entry per layer");
        for (int64_t i = 0; i < n; ++i) {
            const Json& t = lt[size_t(i)];
            const std::string s = t.is_string() ? t.get<std::string>() : "";
            if (s != "sliding_attention" && s != "full_attention")
                c.refuse("layer_types", "holds " + t.dump() + " (expected sliding_attention or full_attention)");
            sliding[size_t(i)] = s == "sliding_attention";
        }
    }
    // transformers turns a sliding last layer into a full one (with a warning): say so instead.
    if (sliding.back()) c.refuse("layer_types", "ends with a sliding layer; Gemma 4's last layer is full_attention");
    std::vector<Value> pattern;
    for (bool s : sliding) pattern.push_back(Value::boolean(s));
    m.metadata.emplace_back(a + "attention.sliding_window_pattern", Value::array(ValueType::boolean, std::move(pattern)));

    // KV heads: num_global_key_value_heads gives the full layers theirs (one count a layer, as the
    // converter writes it); transformers reads it only for attention_k_eq_v's layers.
    const bool k_eq_v = c.boolean_or("attention_k_eq_v", false);
    if (c.has("num_global_key_value_heads")) {
        const int64_t full_kv = c.positive("num_global_key_value_heads");
        if (!k_eq_v && full_kv != m.n_kv_heads)
            c.refuse("num_global_key_value_heads", "differs from num_key_value_heads while attention_k_eq_v is false: "
                                                   "transformers then gives the full layers num_key_value_heads, llama.cpp's "
                                                   "converter num_global_key_value_heads");
        if (m.n_heads % full_kv) c.refuse("num_global_key_value_heads", "does not divide num_attention_heads");
        std::vector<int64_t> counts;
        for (bool s : sliding) counts.push_back(s ? m.n_kv_heads : full_kv);
        m.metadata.emplace_back(a + "attention.head_count_kv", u32s(counts));
    } else {
        if (k_eq_v) c.refuse("attention_k_eq_v", "is true but num_global_key_value_heads (the full layers' KV heads) is missing");
        u32("attention.head_count_kv", m.n_kv_heads);
    }
    if (m.n_heads % m.n_kv_heads) c.refuse("num_key_value_heads", "does not divide num_attention_heads");

    // KV sharing: the last num_kv_shared_layers layers read the KV of the last earlier layer of their kind.
    const int64_t shared = count_of(c, "num_kv_shared_layers", n - 1);
    m.first_shared_kv = n - shared;
    for (int64_t i = n - shared; i < n; ++i) {
        bool source = false;
        for (int64_t j = 0; j < n - shared; ++j) source = source || sliding[size_t(j)] == sliding[size_t(i)];
        if (!source) c.refuse("num_kv_shared_layers", fmt::format("leaves layer {} no earlier layer of its kind to share KV with", i));
    }
    u32("attention.shared_kv_layers", shared);
    const int64_t ffn = c.positive("intermediate_size");
    if (c.boolean_or("use_double_wide_mlp", false)) {  // the KV-sharing layers' MLPs are twice as wide
        if (2 * ffn > int64_t(UINT32_MAX)) c.refuse("intermediate_size", "doubled (use_double_wide_mlp) is out of range");
        std::vector<int64_t> widths;
        for (int64_t i = 0; i < n; ++i) widths.push_back(shared > 0 && i >= n - shared ? 2 * ffn : ffn);
        m.metadata.emplace_back(a + "feed_forward_length", u32s(widths));
    } else {
        u32("feed_forward_length", ffn);
    }

    const int64_t per_layer = count_of(c, "hidden_size_per_layer_input", 1 << 16);
    u32("embedding_length_per_layer_input", per_layer);
    if (per_layer > 0 && c.positive("vocab_size_per_layer_input") != c.positive("vocab_size"))
        c.refuse("vocab_size_per_layer_input", "differs from vocab_size: pagoda's per-layer embedding table has one row a token");

    if (c.boolean_or("enable_moe_block", false)) {  // the 26B-A4B: experts beside every layer's dense MLP
        m.n_experts = c.positive("num_experts");
        const int64_t used = c.positive("top_k_experts");
        if (used > m.n_experts) c.refuse("top_k_experts", "is larger than num_experts");
        u32("expert_count", m.n_experts);
        u32("expert_used_count", used);
        u32("expert_feed_forward_length", c.positive("moe_intermediate_size"));
    }
    if (c.has("final_logit_softcapping")) {
        const double cap = c.number("final_logit_softcapping");
        if (cap < 0) c.refuse("final_logit_softcapping", "is negative");
        if (cap > 0) m.metadata.emplace_back(a + "final_logit_softcapping", Value::f32(float(cap)));
    }
    // What pagoda's builder computes no other way.
    if (c.string_or("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh")
        c.refuse("hidden_activation", "is not gelu_pytorch_tanh, the GELU pagoda's gemma4 computes");
    if (c.string_or("use_bidirectional_attention", "vision") != "vision")
        c.refuse("use_bidirectional_attention", "is not 'vision' or null: pagoda's gemma4 attends causally");
    if (c.boolean_or("attention_bias", false)) c.refuse("attention_bias", "is true, but pagoda's gemma4 builder has no such biases");

    m.tied = top.boolean_or("tie_word_embeddings", true);
    m.head_names = {"lm_head.weight"};
    if (multimodal) {
        m.prefixes = {"model.language_model."};
        m.skipped_prefixes = {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio."};
    } else {
        m.prefixes = {"model."};
    }
    return m;
}

namespace {

// One value a layer from a key that holds either one number or an array of them.
std::vector<int64_t> per_layer(const gguf::File& f, const std::string& key, int64_t n_layers) {
    const Value* v = f.find(key);
    if (!v) fail("{}: key {} is missing", f.name(), key);
    if (!v->as_array()) return std::vector<int64_t>(size_t(n_layers), f.get_int(key));
    std::vector<int64_t> out = f.get_ints(key);
    if (int64_t(out.size()) != n_layers) fail("{}: {} has {} entries for {} layers", f.name(), key, out.size(), n_layers);
    return out;
}

// The one value `what` of the layers that `pick` selects (all equal), or `fallback` when none is picked.
int64_t common(const gguf::File& f, const std::vector<int64_t>& v, const std::vector<bool>& pick, bool want, int64_t fallback,
               const std::string& what) {
    int64_t out = -1;
    for (size_t i = 0; i < v.size(); ++i)
        if (pick[i] == want) {
            if (out >= 0 && v[i] != out) fail("{}: {} differ between layers of one kind, which config.json cannot say", f.name(), what);
            out = v[i];
        }
    return out < 0 ? fallback : out;
}

}  // namespace

std::string gemma4_config_json(const gguf::File& f, const std::string& torch_dtype) {
    const std::string a = std::string(kArch) + ".";
    const int64_t n = f.get_int(a + "block_count"), heads = f.get_int(a + "attention.head_count");
    if (n < 1 || n > kMaxLayers) fail("{}: {}block_count = {} is out of range (1 to {})", f.name(), a, n, kMaxLayers);
    const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
    if (!embd || embd->shape.size() != 2) fail("{}: tensor token_embd.weight is missing or not 2-D", f.name());
    const int64_t hd_full = f.get_int(a + "attention.key_length"), hd = f.get_int_or(a + "attention.key_length_swa", hd_full);
    if (f.get_int_or(a + "attention.value_length", hd_full) != hd_full || f.get_int_or(a + "attention.value_length_swa", hd) != hd)
        fail("{}: gemma4 value lengths that differ from the key lengths have no Gemma4TextConfig form", f.name());
    // Which layers slide: the bool array, or a period (the builder's default 6).
    std::vector<bool> sliding(static_cast<size_t>(n));
    const std::string pattern_key = a + "attention.sliding_window_pattern";
    const Value* pattern = f.find(pattern_key);
    if (pattern && pattern->as_array()) {
        const auto& items = pattern->as_array()->items;
        if (int64_t(items.size()) != n) fail("{}: {} has {} entries for {} layers", f.name(), pattern_key, items.size(), n);
        for (int64_t i = 0; i < n; ++i) {
            const Value& it = items[size_t(i)];
            sliding[size_t(i)] = it.type == ValueType::boolean ? std::get<bool>(it.data) : it.as_int().value_or(0) != 0;
        }
    } else {
        const int64_t period = pattern ? f.get_int(pattern_key) : 6;
        for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = period == 0 || i % period < period - 1;
    }
    if (sliding.back()) fail("{}: the last gemma4 layer slides, which Gemma4TextConfig cannot say (transformers makes it full)", f.name());
    const int64_t shared = f.get_int_or(a + "attention.shared_kv_layers", 0), first_shared = n - shared;
    if (shared < 0 || shared >= n) fail("{}: {}attention.shared_kv_layers = {} is out of range for {} layers", f.name(), a, shared, n);
    if (hd_full < 2 || hd_full > kMaxHeadDim || hd < 2 || hd > kMaxHeadDim)
        fail("{}: gemma4 head sizes {} / {} are out of range", f.name(), hd_full, hd);

    const std::vector<int64_t> kv = per_layer(f, a + "attention.head_count_kv", n);
    const int64_t kv_swa = common(f, kv, sliding, true, kv.back(), "KV-head counts");
    const int64_t kv_full = common(f, kv, sliding, false, kv_swa, "KV-head counts");
    // V = K: the full layers that compute their own KV have no attn_v (all of them, or none).
    int own_full = 0, without_v = 0;
    for (int64_t i = 0; i < first_shared; ++i) {
        const bool has_v = f.find_tensor(fmt::format("blk.{}.attn_v.weight", i)) != nullptr;
        if (sliding[size_t(i)] && !has_v) fail("{}: sliding layer {} has no attn_v.weight, which Gemma 4 has no form for", f.name(), i);
        if (!sliding[size_t(i)]) own_full += 1, without_v += has_v ? 0 : 1;
    }
    if (without_v != 0 && without_v != own_full)
        fail("{}: some full gemma4 layers have attn_v.weight and some not; attention_k_eq_v is one setting", f.name());
    const bool k_eq_v = own_full > 0 && without_v == own_full;
    if (kv_full != kv_swa && !k_eq_v)
        fail("{}: full layers with {} KV heads beside sliding ones with {} have a Gemma4TextConfig form only with V = K "
             "(attention_k_eq_v; full layers without attn_v.weight)", f.name(), kv_full, kv_swa);

    const std::vector<int64_t> widths = per_layer(f, a + "feed_forward_length", n);
    const int64_t ffn = widths.front();
    // use_double_wide_mlp: the KV-sharing layers' FFNs are twice as wide, the others all one width.
    const bool doubled = shared > 0 && widths[size_t(first_shared)] == 2 * ffn;
    for (int64_t i = 0; i < n; ++i)
        if (widths[size_t(i)] != (doubled && i >= first_shared ? 2 * ffn : ffn))
            fail("{}: {}feed_forward_length {} has no Gemma4TextConfig form (one width, the KV-sharing layers' "
                 "doubled or not)", f.name(), a, fmt::join(widths, ", "));

    // RoPE: the full layers' rope_freqs (leading ones, then 1e30) is partial_rotary_factor.
    if (f.get_string_or(a + "rope.scaling.type", "none") != "none") fail("{}: gemma4 with RoPE scaling has no config.json form", f.name());
    if (f.get_int_or(a + "rope.dimension_count", hd_full) != hd_full || f.get_int_or(a + "rope.dimension_count_swa", hd) != hd)
        fail("{}: gemma4 RoPE over part of the heads other than by rope_freqs.weight has no config.json form", f.name());
    int64_t rotated = hd_full / 2;
    if (const gguf::TensorInfo* t = f.find_tensor("rope_freqs.weight")) {
        if (t->type != gguf::GgmlType::F32 || t->shape != std::vector<int64_t>{hd_full / 2})
            fail("{}: tensor rope_freqs.weight is not F32 [{}]", f.name(), hd_full / 2);
        std::vector<float> v(size_t(hd_full / 2));
        std::memcpy(v.data(), t->data, v.size() * 4);
        rotated = 0;
        while (rotated < int64_t(v.size()) && v[size_t(rotated)] == 1.0f) ++rotated;
        for (size_t i = size_t(rotated); i < v.size(); ++i)
            if (v[i] != kUnrotated)
                fail("{}: rope_freqs.weight is not ones then 1e30 (proportional RoPE), which config.json cannot say", f.name());
    }
    const double factor = 2.0 * double(rotated) / double(hd_full);
    if (rotated == 0 || int64_t(double(hd_full) * factor / 2) != rotated)
        fail("{}: rope_freqs.weight rotates {} of {} frequencies, which partial_rotary_factor cannot say", f.name(), rotated, hd_full / 2);
    const double theta = f.get_float_or(a + "rope.freq_base", 10000.0);

    const int64_t experts = f.get_int_or(a + "expert_count", 0);
    for (int64_t i = 0; i < n && experts > 0; ++i)
        for (const char* t : {"ffn_gate_inp.weight", "ffn_gate_inp.scale", "ffn_gate_up_exps.weight", "ffn_down_exps.scale"})
            if (!f.find_tensor(fmt::format("blk.{}.{}", i, t)))
                fail("{}: tensor blk.{}.{} is missing; Gemma 4's experts (enable_moe_block) are in every layer, "
                     "gate and up fused, with both scales", f.name(), i, t);
    const double cap = f.get_float_or(a + "final_logit_softcapping", 0.0);

    const arch::ArchDescription* d = arch::find_architecture(kArch);
    const arch::HfClass* cls = nullptr;
    for (const arch::HfClass& c : d->hf_classes)
        if (c.role == arch::HfRole::main) cls = &c;
    if (!cls) fail("{}: architecture gemma4 has no Hugging Face form here", f.name());
    Json j;
    j["architectures"] = {std::string(cls->name)};
    j["model_type"] = std::string(cls->model_type);
    j["_name_or_path"] = f.get_string_or("general.name", "");
    j["torch_dtype"] = torch_dtype;
    j["hidden_size"] = f.get_int(a + "embedding_length");
    j["num_hidden_layers"] = n;
    j["num_attention_heads"] = heads;
    j["num_key_value_heads"] = kv_swa;
    j["num_global_key_value_heads"] = k_eq_v ? Json(kv_full) : Json(nullptr);
    j["attention_k_eq_v"] = k_eq_v;
    j["head_dim"] = hd;
    j["global_head_dim"] = hd_full;
    j["intermediate_size"] = ffn;
    j["use_double_wide_mlp"] = doubled;
    j["max_position_embeddings"] = f.get_int_or(a + "context_length", 131072);
    j["rms_norm_eps"] = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-6);
    j["sliding_window"] = f.get_int(a + "attention.sliding_window");
    std::vector<std::string> types;
    for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
    j["rope_parameters"] = {
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", factor}, {"rope_theta", theta}}},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", f.get_float_or(a + "rope.freq_base_swa", theta)}}}};
    j["final_logit_softcapping"] = cap > 0 ? Json(cap) : Json(nullptr);
    j["num_kv_shared_layers"] = shared;
    const int64_t vocab = embd->shape.back();
    j["vocab_size"] = vocab;
    j["hidden_size_per_layer_input"] = f.get_int_or(a + "embedding_length_per_layer_input", 0);
    j["vocab_size_per_layer_input"] = vocab;
    j["enable_moe_block"] = experts > 0;
    j["num_experts"] = experts > 0 ? Json(experts) : Json(nullptr);
    j["top_k_experts"] = experts > 0 ? Json(f.get_int(a + "expert_used_count")) : Json(nullptr);
    j["moe_intermediate_size"] = experts > 0 ? Json(f.get_int(a + "expert_feed_forward_length")) : Json(nullptr);
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["attention_bias"] = false;
    j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
    return j.dump(2) + "\n";
}

}  // namespace pagoda::hf
