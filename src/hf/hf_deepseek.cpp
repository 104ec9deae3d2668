#include "hf/hf_deepseek.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::hf {

using detail::Config;
using gguf::Value;

namespace {

// A count that may be 0 (n_shared_experts, first_k_dense_replace, num_nextn_predict_layers).
int64_t count_or_zero(const Config& c, const char* key, int64_t limit) {
    const int64_t v = c.has(key) ? c.integer(key) : 0;
    if (v < 0 || v > limit) c.refuse(key, "is out of range (0 to " + std::to_string(limit) + ")");
    return v;
}

}  // namespace

void read_deepseek2_config(const Config& c, HfModel& m) {
    const std::string a = m.arch + ".";
    auto u32 = [&](const std::string& key, int64_t v) { m.metadata.emplace_back(a + key, Value::u32(uint32_t(v))); };
    // FP8 checkpoints (DeepSeek V3's own, Kimi K2's) keep block scales beside each weight: not read here.
    if (c.has("quantization_config"))
        c.refuse("quantization_config", "is set: pagoda reads unquantised (BF16 / F16 / F32) DeepSeek folders only "
                                        "(dequantise the FP8 checkpoint to BF16 first)");
    if (!c.boolean_or("rope_interleave", true))
        c.refuse("rope_interleave", "is false, but deepseek2 (as llama.cpp's converter) rotates the checkpoint's adjacent pairs");
    const int64_t kv_lora = c.positive("kv_lora_rank"), nope = c.positive("qk_nope_head_dim");
    const int64_t rope = c.positive("qk_rope_head_dim"), v = c.positive("v_head_dim");
    const int64_t q_lora = c.has("q_lora_rank") ? c.integer("q_lora_rank") : 0;  // null: V2-Lite's plain q_proj
    if (q_lora < 0 || q_lora > (int64_t(1) << 24)) c.refuse("q_lora_rank", "is out of range");
    if (rope % 2) c.refuse("qk_rope_head_dim", "is odd (RoPE rotates pairs)");
    if (v > nope + rope) c.refuse("v_head_dim", "exceeds qk_nope_head_dim + qk_rope_head_dim, which pagoda's deepseek2 does not run");
    m.head_dim = nope + rope;
    m.n_kv_heads = 1;  // MLA runs as one latent KV head
    m.mla_nope = nope;
    m.mla_v = v;
    m.mla_kv_lora = kv_lora;
    if (q_lora > 0) u32("attention.q_lora_rank", q_lora);
    u32("attention.kv_lora_rank", kv_lora);
    u32("attention.key_length", kv_lora + rope);
    u32("attention.value_length", kv_lora);
    u32("attention.key_length_mla", nope + rope);
    u32("attention.value_length_mla", v);

    u32("feed_forward_length", c.positive("intermediate_size"));
    m.n_experts = c.positive("n_routed_experts");
    u32("expert_count", m.n_experts);
    u32("expert_used_count", c.positive("num_experts_per_tok"));
    u32("expert_feed_forward_length", c.positive("moe_intermediate_size"));
    u32("expert_shared_count", count_or_zero(c, "n_shared_experts", 1024));
    u32("leading_dense_block_count", count_or_zero(c, "first_k_dense_replace", m.n_layers));
    if (c.positive_or("moe_layer_freq", 1) != 1)
        c.refuse("moe_layer_freq", "is not 1: pagoda's deepseek2 has routed experts in every layer after the dense ones");
    m.metadata.emplace_back(a + "expert_weights_scale", Value::f32(float(c.number_or("routed_scaling_factor", 1.0))));
    m.metadata.emplace_back(a + "expert_weights_norm", Value::boolean(c.boolean_or("norm_topk_prob", false)));
    const std::string scoring = c.string_or("scoring_func", "softmax");
    if (scoring != "sigmoid" && scoring != "softmax") c.refuse("scoring_func", "is '" + scoring + "' (expected sigmoid or softmax)");
    u32("expert_gating_func", scoring == "sigmoid" ? 2 : 1);

    // Groups: pagoda (as llama.cpp) ranks a group by the sum of its two best biased scores, V3's
    // noaux_tc. V2's group_limited_greedy ranks by the best one; greedy ignores groups.
    const int64_t groups = c.positive_or("n_group", 1), used = c.positive_or("topk_group", groups);
    if (used > groups) c.refuse("topk_group", "exceeds n_group");
    if (m.n_experts % groups) c.refuse("n_group", "does not divide n_routed_experts");
    const std::string method = c.string_or("topk_method", "greedy");
    if (method != "greedy" && method != "noaux_tc" && method != "group_limited_greedy")
        c.refuse("topk_method", "is '" + method + "' (expected greedy, group_limited_greedy or noaux_tc)");
    if (used < groups && method != "noaux_tc")
        c.refuse("topk_method", "is '" + method + "' with topk_group < n_group; pagoda limits groups as noaux_tc does "
                                 "(the sum of each group's two best scores), which would change this model's routing");
    if (c.has("n_group")) u32("expert_group_count", groups);
    if (c.has("topk_group")) u32("expert_group_used_count", used);
    m.nextn_layers = count_or_zero(c, "num_nextn_predict_layers", 64);

    if (!c.has("rope_scaling")) return;
    const Config rs = c.object("rope_scaling");
    const std::string type = rs.has("rope_type") ? rs.string_or("rope_type", "") : rs.string_or("type", "default");
    if (type == "default") return;
    if (type != "yarn") c.refuse("rope_scaling", "has type '" + type + "'; pagoda's deepseek2 runs yarn (or none)");
    // DeepSeek's YaRN scales the scores by mscale(mscale_all_dim)^2 and the rotation by
    // mscale(mscale) / mscale(mscale_all_dim): pagoda (as llama.cpp) computes the case where that ratio is 1.
    const double all_dim = rs.number("mscale_all_dim");
    if (!(all_dim > 0 && all_dim < 100)) rs.refuse("mscale_all_dim", "must be positive");
    if (rs.number_or("mscale", all_dim) != all_dim)
        rs.refuse("mscale", "differs from mscale_all_dim, which would scale the rotation itself (not computed by pagoda)");
    m.metadata.emplace_back(a + "rope.scaling.type", Value::string("yarn"));
    m.metadata.emplace_back(a + "rope.scaling.factor", Value::f32(float(rs.number("factor"))));
    u32("rope.scaling.original_context_length", rs.positive("original_max_position_embeddings"));
    m.metadata.emplace_back(a + "rope.scaling.yarn_log_multiplier", Value::f32(float(0.1 * all_dim)));
    // ggml's defaults are 32 and 1; Kimi K2 states others.
    for (const auto& [key, gguf_key, fallback] : {std::tuple{"beta_fast", "yarn_beta_fast", 32.0}, std::tuple{"beta_slow", "yarn_beta_slow", 1.0}})
        if (rs.number_or(key, fallback) != fallback)
            m.metadata.emplace_back(a + "rope.scaling." + gguf_key, Value::f32(float(rs.number(key))));
}

void write_deepseek2_config(const gguf::File& f, nlohmann::json& j) {
    const std::string a = "deepseek2.";
    if (f.get_int_or(a + "nextn_predict_layers", 0) > 0)
        fail("{}: NextN blocks have no Hugging Face form here (write the model without them)", f.name());
    const int64_t heads = f.get_int(a + "attention.head_count"), rope = f.get_int(a + "rope.dimension_count");
    const bool mla_keys = f.has(a + "attention.key_length_mla");
    const int64_t hk = f.get_int(a + (mla_keys ? "attention.key_length_mla" : "attention.key_length"));
    const int64_t v = f.get_int(a + (mla_keys ? "attention.value_length_mla" : "attention.value_length"));
    const int64_t q_lora = f.get_int_or(a + "attention.q_lora_rank", 0);
    j["num_key_value_heads"] = heads;  // MLA's query heads; the GGUF's one latent KV head is implied
    j["head_dim"] = rope;              // as DeepseekV3Config sets it
    j["q_lora_rank"] = q_lora > 0 ? nlohmann::json(q_lora) : nlohmann::json(nullptr);
    j["kv_lora_rank"] = f.get_int(a + "attention.kv_lora_rank");
    j["qk_nope_head_dim"] = hk - rope;
    j["qk_rope_head_dim"] = rope;
    j["v_head_dim"] = v;
    j["rope_interleave"] = true;
    j["attention_bias"] = false;
    j["n_routed_experts"] = f.get_int(a + "expert_count");
    j["num_experts_per_tok"] = f.get_int(a + "expert_used_count");
    j["moe_intermediate_size"] = f.get_int(a + "expert_feed_forward_length");
    j["n_shared_experts"] = f.get_int_or(a + "expert_shared_count", 0);
    j["first_k_dense_replace"] = f.get_int(a + "leading_dense_block_count");
    j["moe_layer_freq"] = 1;
    j["routed_scaling_factor"] = f.get_float_or(a + "expert_weights_scale", 1.0);
    j["norm_topk_prob"] = f.get_bool_or(a + "expert_weights_norm", false);
    const int64_t gating = f.get_int_or(a + "expert_gating_func", 1);
    if (gating != 1 && gating != 2) fail("{}: {}expert_gating_func {} has no DeepseekV3Config form", f.name(), a, gating);
    j["scoring_func"] = gating == 2 ? "sigmoid" : "softmax";
    const bool bias = f.find_tensor("blk." + std::to_string(f.get_int(a + "leading_dense_block_count")) + ".exp_probs_b.bias");
    const int64_t groups = f.get_int_or(a + "expert_group_count", 0), used = f.get_int_or(a + "expert_group_used_count", groups);
    if (groups > 1 && used < groups && !bias)
        fail("{}: expert groups without exp_probs_b.bias have no DeepseekV3Config form (topk_method noaux_tc has the bias)", f.name());
    j["topk_method"] = bias ? "noaux_tc" : "greedy";
    if (f.has(a + "expert_group_count")) j["n_group"] = groups;
    if (f.has(a + "expert_group_used_count")) j["topk_group"] = used;
    j["num_nextn_predict_layers"] = 0;
    const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
    if (scaling == "yarn") {
        // mscale_all_dim = yarn_log_multiplier / 0.1, chosen so that the reader's 0.1 x it gives the same f32 back.
        const float mul = float(f.get_float(a + "rope.scaling.yarn_log_multiplier"));
        double all_dim = double(float(double(mul) / 0.1));
        if (float(0.1 * all_dim) != mul) all_dim = double(mul) / 0.1;
        nlohmann::json rs = {{"type", "yarn"},
                             {"factor", f.get_float(a + "rope.scaling.factor")},
                             {"original_max_position_embeddings", f.get_int(a + "rope.scaling.original_context_length")},
                             {"mscale", all_dim},
                             {"mscale_all_dim", all_dim},
                             {"beta_fast", f.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0)},
                             {"beta_slow", f.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0)}};
        if (f.has(a + "rope.scaling.attn_factor") || f.has(a + "rope.scaling.yarn_ext_factor"))
            fail("{}: {}rope.scaling.attn_factor / yarn_ext_factor have no DeepseekV3Config form", f.name(), a);
        j["rope_scaling"] = rs;
    } else if (scaling != "none") {
        fail("{}: RoPE scaling '{}' has no DeepseekV3Config form", f.name(), scaling);
    }
}

void split_kv_b(const uint8_t* kv_b, uint8_t* k_b, uint8_t* v_b, int64_t heads, int64_t nope, int64_t v, int64_t kv_lora,
                uint64_t elt) {
    for (int64_t h = 0; h < heads; ++h) {
        const uint8_t* head = kv_b + uint64_t(h * (nope + v) * kv_lora) * elt;
        for (int64_t i = 0; i < kv_lora; ++i)  // k_b[h][i][j] = kv_b[h][j][i]
            for (int64_t j = 0; j < nope; ++j)
                std::memcpy(k_b + uint64_t((h * kv_lora + i) * nope + j) * elt, head + uint64_t(j * kv_lora + i) * elt, elt);
        std::memcpy(v_b + uint64_t(h * v * kv_lora) * elt, head + uint64_t(nope * kv_lora) * elt, uint64_t(v * kv_lora) * elt);
    }
}

void join_kv_b(const uint8_t* k_b, const uint8_t* v_b, uint8_t* kv_b, int64_t heads, int64_t nope, int64_t v, int64_t kv_lora,
               uint64_t elt) {
    for (int64_t h = 0; h < heads; ++h) {
        uint8_t* head = kv_b + uint64_t(h * (nope + v) * kv_lora) * elt;
        for (int64_t i = 0; i < kv_lora; ++i)
            for (int64_t j = 0; j < nope; ++j)
                std::memcpy(head + uint64_t(j * kv_lora + i) * elt, k_b + uint64_t((h * kv_lora + i) * nope + j) * elt, elt);
        std::memcpy(head + uint64_t(nope * kv_lora) * elt, v_b + uint64_t(h * v * kv_lora) * elt, uint64_t(v * kv_lora) * elt);
    }
}

}  // namespace pagoda::hf
