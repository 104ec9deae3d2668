#include "hf/hf_qwen35.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::hf {

using detail::Config;
using gguf::Value;

Qwen35Rope read_qwen35_config(const Config& c, HfModel& m) {
    const std::string a = m.arch + ".";
    auto set = [&](const std::string& key, Value v) { m.metadata.emplace_back(a + key, std::move(v)); };
    const int64_t kernel = c.positive("linear_conv_kernel_dim");
    m.delta_head = c.positive("linear_key_head_dim");
    m.delta_k_heads = c.positive("linear_num_key_heads");
    m.delta_v_heads = c.positive("linear_num_value_heads");
    if (c.positive("linear_value_head_dim") != m.delta_head)
        c.refuse("linear_value_head_dim", "differs from linear_key_head_dim: pagoda's qwen35 DeltaNet needs equal head sizes");
    if (m.delta_v_heads % m.delta_k_heads)
        c.refuse("linear_num_value_heads", "is not a multiple of linear_num_key_heads");
    if (kernel < 2) c.refuse("linear_conv_kernel_dim", "is below 2 taps");
    set("ssm.conv_kernel", Value::u32(uint32_t(kernel)));
    set("ssm.state_size", Value::u32(uint32_t(m.delta_head)));
    set("ssm.group_count", Value::u32(uint32_t(m.delta_k_heads)));
    set("ssm.time_step_rank", Value::u32(uint32_t(m.delta_v_heads)));
    set("ssm.inner_size", Value::u32(uint32_t(m.delta_v_heads * m.delta_head)));

    // Layer i is full attention when (i + 1) % interval == 0; layer_types, where given, must say the same.
    const int64_t interval = c.positive_or("full_attention_interval", 4);
    if (interval > m.n_layers) c.refuse("full_attention_interval", "exceeds num_hidden_layers");
    set("full_attention_interval", Value::u32(uint32_t(interval)));
    if (c.has("layer_types")) {
        const nlohmann::json& lt = c.at("layer_types");
        if (!lt.is_array() || int64_t(lt.size()) != m.n_layers) c.refuse("layer_types", "is not one entry per layer");
        for (int64_t i = 0; i < m.n_layers; ++i) {
            const char* want = (i + 1) % interval == 0 ? "full_attention" : "linear_attention";
            if (!lt[size_t(i)].is_string() || lt[size_t(i)].get<std::string>() != want)
                c.refuse("layer_types", "differs from every full_attention_interval-th layer being full attention (layer " +
                                            std::to_string(i) + " should be " + want + "), the only pattern pagoda's qwen35 runs");
        }
    }

    // Rotary settings: rope_parameters (newer configs) or the top level; mrope_section also under rope_scaling.
    const Config rp = c.has("rope_parameters") ? c.object("rope_parameters") : c;
    const double factor = rp.has("partial_rotary_factor") ? rp.number("partial_rotary_factor") : c.number_or("partial_rotary_factor", 0.25);
    if (!(factor > 0 && factor <= 1)) c.refuse("partial_rotary_factor", "must be in (0, 1]");
    Qwen35Rope r{int64_t(double(m.head_dim) * factor), rp.has("rope_theta") ? rp.number("rope_theta") : c.number_or("rope_theta", 10000.0)};
    if (r.dims < 2 || r.dims % 2) c.refuse("partial_rotary_factor", "leaves an odd or empty rotary width of the head");
    std::vector<float> sections = {11, 11, 10};
    if (rp.has("mrope_section")) sections = rp.floats("mrope_section");
    else if (c.has("rope_scaling") && c.object("rope_scaling").has("mrope_section")) sections = c.object("rope_scaling").floats("mrope_section");
    if (sections.empty() || sections.size() > 4) c.refuse("rope_parameters", "has an mrope_section of other than 1 to 4 entries");
    std::vector<int32_t> s4(4, 0);
    for (size_t i = 0; i < sections.size(); ++i) {
        if (!(sections[i] >= 0 && sections[i] <= 65536) || sections[i] != std::floor(sections[i]))
            c.refuse("rope_parameters", "has an mrope_section entry that is not a count of dimension pairs");
        s4[i] = int32_t(sections[i]);
    }
    if (m.arch != "qwen3next") set("rope.dimension_sections", Value::i32s(s4));  // Qwen3-Next: plain RoPE
    if (m.hf_arch.ends_with("ForConditionalGeneration")) {
        m.prefixes = {"model.language_model."};
        m.head_names = {"lm_head.weight"};
        m.skipped_prefixes = {"model.visual.", "mtp."};  // the vision tower and the MTP head: not run
    } else {
        m.skipped_prefixes = {"mtp."};
    }
    m.norm_plus_one = true;  // Qwen3-Next's RMSNorms compute x·(1 + w) (all but the DeltaNet's gated norm)
    return r;
}

void write_qwen35_config(const gguf::File& f, nlohmann::json& j) {
    const std::string arch = f.get_string_or("general.architecture", "");
    const std::string a = arch + ".";
    const int64_t head_dim = f.get_int(a + "attention.key_length");
    if (f.get_int_or(a + "nextn_predict_layers", 0) > 0)
        fail("{}: NextN blocks have no Hugging Face form here (write the model without them)", f.name());
    if (f.has(a + "attention.recurrent_layers"))
        fail("{}: {}attention.recurrent_layers has no config.json form here (use full_attention_interval)", f.name(), a);
    j["linear_conv_kernel_dim"] = f.get_int(a + "ssm.conv_kernel");
    j["linear_key_head_dim"] = f.get_int(a + "ssm.state_size");
    j["linear_value_head_dim"] = f.get_int(a + "ssm.inner_size") / f.get_int(a + "ssm.time_step_rank");
    j["linear_num_key_heads"] = f.get_int(a + "ssm.group_count");
    j["linear_num_value_heads"] = f.get_int(a + "ssm.time_step_rank");
    const int64_t interval = f.get_int_or(a + "full_attention_interval", 4), n_layers = f.get_int(a + "block_count");
    j["full_attention_interval"] = interval;
    std::vector<std::string> types;
    for (int64_t i = 0; i < n_layers; ++i) types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
    j["layer_types"] = types;
    j["attention_bias"] = false;
    const double partial_rotary = double(f.get_int(a + "rope.dimension_count")) / double(head_dim);
    if (arch == "qwen3next" || arch == "qwen35moe") {  // the sparse experts: every layer (no decoder_sparse_step gaps)
        j["num_experts"] = f.get_int(a + "expert_count");
        j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
        j["moe_intermediate_size"] = f.get_int(a + "expert_feed_forward_length");
        j["shared_expert_intermediate_size"] = f.get_int(a + "expert_shared_feed_forward_length");
        j["norm_topk_prob"] = f.get_bool_or(a + "expert_weights_norm", true);
        j["decoder_sparse_step"] = 1;
    }
    if (arch == "qwen3next") {  // Qwen3NextConfig: top-level rotary keys, no M-RoPE
        j["partial_rotary_factor"] = partial_rotary;
        j["mlp_only_layers"] = nlohmann::json::array();
        return;
    }
    nlohmann::json rp = {{"rope_type", "default"}, {"rope_theta", f.get_float_or(a + "rope.freq_base", 10000.0)},
                         {"partial_rotary_factor", partial_rotary}, {"mrope_interleaved", true}};
    std::vector<int64_t> sections;
    if (const auto* v = f.find(a + "rope.dimension_sections"); v && v->as_array())
        for (const auto& item : v->as_array()->items) sections.push_back(item.as_int().value_or(0));
    while (sections.size() > 3 && sections.back() == 0) sections.pop_back();
    if (!sections.empty()) rp["mrope_section"] = sections;
    j["rope_parameters"] = rp;
    j.erase("rope_theta");
}

void reorder_v_heads(const HfModel& m, VHeads kind, const std::vector<int64_t>& shape, uint64_t elt, const uint8_t* in,
                     uint8_t* out, bool to_tiled) {
    uint64_t total = elt;
    for (int64_t d : shape) total *= uint64_t(d);
    std::memcpy(out, in, total);
    const int64_t nk = m.delta_k_heads, nv = m.delta_v_heads;
    if (kind == VHeads::none || nk == nv || nk == 0) return;
    const int64_t r = nv / nk, rows = shape.empty() ? 1 : shape[0];
    const uint64_t row_bytes = total / uint64_t(rows);
    // Moves value-head blocks of `block` bytes starting at byte `base`; grouped k*r + i <-> tiled i*nk + k.
    auto permute = [&](uint64_t base, uint64_t block) {
        for (int64_t k = 0; k < nk; ++k)
            for (int64_t i = 0; i < r; ++i) {
                const uint64_t grouped = base + uint64_t(k * r + i) * block, tiled = base + uint64_t(i * nk + k) * block;
                std::memcpy(out + (to_tiled ? tiled : grouped), in + (to_tiled ? grouped : tiled), block);
            }
    };
    if (kind == VHeads::rows) {
        if (rows % nv) fail("a value-head tensor of {} rows is not whole {} value heads", rows, nv);
        permute(0, uint64_t(rows / nv) * row_bytes);
    } else if (kind == VHeads::rows_after_qk) {
        const int64_t qk = 2 * nk * m.delta_head, v = nv * m.delta_head;
        if (rows != qk + v) fail("a DeltaNet Q|K|V tensor has {} rows, expected {}", rows, qk + v);
        permute(uint64_t(qk) * row_bytes, uint64_t(m.delta_head) * row_bytes);
    } else {
        const uint64_t cols = row_bytes / elt;
        if (cols != uint64_t(nv * m.delta_head)) fail("a DeltaNet output tensor has {} columns, expected {}", cols, nv * m.delta_head);
        for (int64_t row = 0; row < rows; ++row) permute(uint64_t(row) * row_bytes, uint64_t(m.delta_head) * elt);
    }
}

float ssm_a_of(float a_log) { return -std::exp(a_log); }

float a_log_of(float a) {
    if (!(a < 0) || !std::isfinite(a)) fail("ssm_a holds {}, which is not -exp of any A_log", a);
    const float guess = std::log(-a);
    float down = guess, up = guess;
    for (int step = 0; step < 64; ++step) {
        if (ssm_a_of(down) == a) return down;
        if (ssm_a_of(up) == a) return up;
        down = std::nextafter(down, -INFINITY);
        up = std::nextafter(up, INFINITY);
    }
    fail("ssm_a holds {}, which no f32 A_log gives as -exp(A_log) (write ssm_a from an A_log)", a);
}

}  // namespace pagoda::hf
