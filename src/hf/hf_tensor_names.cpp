#include "hf/hf_tensor_names.h"

#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <utility>

#include "arch/arch_description.h"
#include "core/error.h"

namespace pagoda::hf {
namespace {

// One layer tensor: HF name after "layers.N." (with "{e}" for the expert index) and GGUF name after "blk.N.".
struct Rule {
    std::string hf, gguf;
    Transform transform = Transform::none;
    bool force_f32 = false;
    bool flatten = false;
    VHeads v_heads = VHeads::none;
    bool squeeze = false;
};

// Qwen3.5 / 3.6 (qwen35, qwen35moe) and Qwen3-Next (qwen3next): gated attention and gated DeltaNet
// layers; every RMSNorm but the DeltaNet's gated one is stored as w for x·(1 + w).
std::vector<Rule> qwen35_rules(const HfModel& m) {
    const Transform one = Transform::plus_one, none = Transform::none;
    std::vector<Rule> r = {
        {"input_layernorm.weight", "attn_norm.weight", one, true},
        {"post_attention_layernorm.weight", "post_attention_norm.weight", one, true},
        {"self_attn.q_proj.weight", "attn_q.weight"},  // per head: its query rows, then its output gate's
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight", one, true},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", one, true},
        {"linear_attn.norm.weight", "ssm_norm.weight", none, true},
    };
    if (m.arch == "qwen3next") {
        // Qwen3-Next's fused in-projections are the older converters' GGUF tensors byte for byte
        // (in_proj_qkvz: per key head q, k, its group's v rows, their z rows; in_proj_ba: per key head
        // its group's beta rows, then their alpha rows); value heads stay grouped.
        const std::vector<Rule> next = {
            {"linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},
            {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
            {"linear_attn.conv1d.weight", "ssm_conv1d.weight", none, true, false, VHeads::none, true},
            {"linear_attn.dt_bias", "ssm_dt.bias", none, true},
            {"linear_attn.A_log", "ssm_a", Transform::neg_exp, true},
            {"linear_attn.out_proj.weight", "ssm_out.weight"},
        };
        r.insert(r.end(), next.begin(), next.end());
    } else {
        const std::vector<Rule> q35 = {
            {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", none, false, false, VHeads::rows_after_qk},
            {"linear_attn.in_proj_z.weight", "attn_gate.weight", none, false, false, VHeads::rows},
            {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", none, false, false, VHeads::rows},
            {"linear_attn.in_proj_b.weight", "ssm_beta.weight", none, false, false, VHeads::rows},
            {"linear_attn.conv1d.weight", "ssm_conv1d.weight", none, true, false, VHeads::rows_after_qk, true},
            {"linear_attn.dt_bias", "ssm_dt.bias", none, true, false, VHeads::rows},
            {"linear_attn.A_log", "ssm_a", Transform::neg_exp, true, false, VHeads::rows},
            {"linear_attn.out_proj.weight", "ssm_out.weight", none, false, false, VHeads::columns},
        };
        r.insert(r.end(), q35.begin(), q35.end());
    }
    if (m.n_experts > 0) {
        r.push_back({"mlp.gate.weight", "ffn_gate_inp.weight", none, true});
        r.push_back({"mlp.experts.{e}.gate_proj.weight", "ffn_gate_exps.weight"});
        r.push_back({"mlp.experts.{e}.up_proj.weight", "ffn_up_exps.weight"});
        r.push_back({"mlp.experts.{e}.down_proj.weight", "ffn_down_exps.weight"});
        // The published checkpoints' fused form: gate_up_proj [E, 2 ffn, dim] (each expert's gate rows,
        // then its up rows) and down_proj [E, dim, ffn], already the GGUF's stacked layouts.
        r.push_back({"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"});
        r.push_back({"mlp.experts.down_proj", "ffn_down_exps.weight"});
        r.push_back({"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"});
        r.push_back({"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"});
        r.push_back({"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"});
        r.push_back({"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", none, true, true});
    } else {
        r.push_back({"mlp.gate_proj.weight", "ffn_gate.weight"});
        r.push_back({"mlp.up_proj.weight", "ffn_up.weight"});
        r.push_back({"mlp.down_proj.weight", "ffn_down.weight"});
    }
    return r;
}

// deepseek2 (DeepSeek V2 / V3, Kimi K2, GLM-4.7-Flash): multi-head latent attention, dense MLPs in
// the first layers, then routed experts with V3's selection bias and ungated shared experts.
std::vector<Rule> deepseek2_rules() {
    const Transform none = Transform::none;
    return {{"input_layernorm.weight", "attn_norm.weight", none, true},
            {"self_attn.q_proj.weight", "attn_q.weight"},  // no q_lora_rank (V2-Lite)
            {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
            {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight", none, true},
            {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
            {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
            {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight", none, true},
            {"self_attn.kv_b_proj.weight", "attn_kv_b.weight", Transform::split_kv_b},
            {"self_attn.o_proj.weight", "attn_output.weight"},
            {"post_attention_layernorm.weight", "ffn_norm.weight", none, true},
            {"mlp.gate_proj.weight", "ffn_gate.weight"},
            {"mlp.up_proj.weight", "ffn_up.weight"},
            {"mlp.down_proj.weight", "ffn_down.weight"},
            {"mlp.gate.weight", "ffn_gate_inp.weight", none, true},
            {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias", none, true},
            {"mlp.experts.{e}.gate_proj.weight", "ffn_gate_exps.weight"},
            {"mlp.experts.{e}.up_proj.weight", "ffn_up_exps.weight"},
            {"mlp.experts.{e}.down_proj.weight", "ffn_down_exps.weight"},
            {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
            {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
            {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"}};
}

// gpt-oss: biased attention with sinks, post_attention_norm before a biased router, and the experts
// in one of two forms (MXFP4 blocks + scales, or dequantised [E, in, out]), gate and up fused.
std::vector<Rule> gpt_oss_rules() {
    const Transform none = Transform::none;
    std::vector<Rule> r = {{"input_layernorm.weight", "attn_norm.weight", none, true},
                           {"post_attention_layernorm.weight", "post_attention_norm.weight", none, true},
                           {"self_attn.o_proj.weight", "attn_output.weight"},
                           {"self_attn.o_proj.bias", "attn_output.bias", none, true},
                           {"self_attn.sinks", "attn_sinks.weight", none, true},
                           {"mlp.router.weight", "ffn_gate_inp.weight", none, true},
                           {"mlp.router.bias", "ffn_gate_inp.bias", none, true},
                           {"mlp.experts.gate_up_proj_blocks", "ffn_gate_up_exps.weight", Transform::mxfp4},
                           {"mlp.experts.gate_up_proj_scales", "ffn_gate_up_exps.weight", Transform::mxfp4},
                           {"mlp.experts.down_proj_blocks", "ffn_down_exps.weight", Transform::mxfp4},
                           {"mlp.experts.down_proj_scales", "ffn_down_exps.weight", Transform::mxfp4},
                           {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight", Transform::experts_io},
                           {"mlp.experts.down_proj", "ffn_down_exps.weight", Transform::experts_io},
                           {"mlp.experts.gate_up_proj_bias", "ffn_gate_up_exps.bias", Transform::gate_up_bias},
                           {"mlp.experts.down_proj_bias", "ffn_down_exps.bias", none, true}};
    for (const char* x : {"q", "k", "v"}) {
        r.push_back({fmt::format("self_attn.{}_proj.weight", x), fmt::format("attn_{}.weight", x)});
        r.push_back({fmt::format("self_attn.{}_proj.bias", x), fmt::format("attn_{}.bias", x), none, true});
    }
    return r;
}

// gemma4: norms stored as used, V = K layers without v_proj, the 26B-A4B's router (its input scale and
// per-expert output scale) and fused experts beside the dense MLP, the E-models' per-layer input
// gate / projection / norm, and the layer's output scalar (a [1] buffer in the checkpoint).
std::vector<Rule> gemma4_rules() {
    const Transform none = Transform::none;
    return {{"input_layernorm.weight", "attn_norm.weight", none, true},
            {"self_attn.q_proj.weight", "attn_q.weight"},
            {"self_attn.k_proj.weight", "attn_k.weight"},
            {"self_attn.v_proj.weight", "attn_v.weight"},
            {"self_attn.o_proj.weight", "attn_output.weight"},
            {"self_attn.q_norm.weight", "attn_q_norm.weight", none, true},
            {"self_attn.k_norm.weight", "attn_k_norm.weight", none, true},
            {"post_attention_layernorm.weight", "post_attention_norm.weight", none, true},
            {"pre_feedforward_layernorm.weight", "ffn_norm.weight", none, true},
            {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", none, true},
            {"mlp.gate_proj.weight", "ffn_gate.weight"},
            {"mlp.up_proj.weight", "ffn_up.weight"},
            {"mlp.down_proj.weight", "ffn_down.weight"},
            {"layer_scalar", "layer_output_scale.weight", none, true},
            {"router.proj.weight", "ffn_gate_inp.weight", none, true},
            {"router.scale", "ffn_gate_inp.scale", none, true},
            {"router.per_expert_scale", "ffn_down_exps.scale", none, true},
            {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},  // [E, 2 ffn, dim]: gate rows, then up rows
            {"experts.down_proj", "ffn_down_exps.weight"},
            {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", none, true},
            {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", none, true},
            {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", none, true},
            {"per_layer_input_gate.weight", "inp_gate.weight"},
            {"per_layer_projection.weight", "proj.weight"},
            {"post_per_layer_input_norm.weight", "post_norm.weight", none, true}};
}

// gemma4's model-level per-layer embedding tensors (HF name after the prefix, GGUF name).
constexpr std::pair<const char*, const char*> kGemma4Globals[] = {
    {"embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
    {"per_layer_model_projection.weight", "per_layer_model_proj.weight"},
    {"per_layer_projection_norm.weight", "per_layer_proj_norm.weight"}};

std::vector<Rule> layer_rules(const HfModel& m) {
    if (m.arch == "gemma4") return gemma4_rules();
    if (m.arch == "qwen35" || m.arch == "qwen35moe" || m.arch == "qwen3next") return qwen35_rules(m);
    if (m.arch == "deepseek2") return deepseek2_rules();
    if (m.arch == "gpt-oss") return gpt_oss_rules();
    const arch::ArchDescription* d = arch::find_architecture(m.arch);
    if (!d) fail("architecture '{}' has no description", m.arch);
    // phi3's fused Q/K/V and gate|up, as its manifest states them (no required attn_q, no ffn_gate).
    const arch::TensorEntry* q = d->layer_tensor("attn_q.weight");
    const bool fused_qkv = !q || q->presence != arch::Presence::required, fused_gate_up = !d->has_layer_tensor("ffn_gate.weight");
    const bool gemma = m.norm_plus_one;
    const Transform norm = gemma ? Transform::plus_one : Transform::none;
    std::vector<Rule> r = {{"input_layernorm.weight", "attn_norm.weight", norm, true},
                           {"self_attn.o_proj.weight", "attn_output.weight"}};
    if (fused_qkv) {
        r.push_back({"self_attn.qkv_proj.weight", "attn_qkv.weight"});
    } else {
        r.push_back({"self_attn.q_proj.weight", "attn_q.weight", m.permute_qk ? Transform::permute_q : Transform::none});
        r.push_back({"self_attn.k_proj.weight", "attn_k.weight", m.permute_qk ? Transform::permute_k : Transform::none});
        r.push_back({"self_attn.v_proj.weight", "attn_v.weight"});
    }
    // Q/K/V biases and per-head Q/K norms where the architecture's description has them.
    if (d->qkv_bias != arch::Has::no)
        for (const char* x : {"q", "k", "v"})
            r.push_back({fmt::format("self_attn.{}_proj.bias", x), fmt::format("attn_{}.bias", x), Transform::none, true});
    if (d->qk_norm != arch::Has::no) {
        r.push_back({"self_attn.q_norm.weight", "attn_q_norm.weight", norm, true});
        r.push_back({"self_attn.k_norm.weight", "attn_k_norm.weight", norm, true});
    }
    if (m.arch == "glm4") {  // sandwich norms around a fused gate|up MLP
        r.push_back({"post_self_attn_layernorm.weight", "post_attention_norm.weight", Transform::none, true});
        r.push_back({"post_attention_layernorm.weight", "ffn_norm.weight", Transform::none, true});
        r.push_back({"post_mlp_layernorm.weight", "post_ffw_norm.weight", Transform::none, true});
        r.push_back({"mlp.gate_up_proj.weight", "ffn_up.weight"});
        r.push_back({"mlp.down_proj.weight", "ffn_down.weight"});
        return r;
    }
    if (m.arch == "glm4moe") {  // the FFN's input norm is llama.cpp's post_attention_norm here
        r.push_back({"post_attention_layernorm.weight", "post_attention_norm.weight", Transform::none, true});
        r.push_back({"mlp.gate_proj.weight", "ffn_gate.weight"});  // the leading dense layers
        r.push_back({"mlp.up_proj.weight", "ffn_up.weight"});
        r.push_back({"mlp.down_proj.weight", "ffn_down.weight"});
        r.push_back({"mlp.gate.weight", "ffn_gate_inp.weight", Transform::none, true});
        r.push_back({"mlp.gate.e_score_correction_bias", "exp_probs_b.bias", Transform::none, true});
        r.push_back({"mlp.experts.{e}.gate_proj.weight", "ffn_gate_exps.weight"});
        r.push_back({"mlp.experts.{e}.up_proj.weight", "ffn_up_exps.weight"});
        r.push_back({"mlp.experts.{e}.down_proj.weight", "ffn_down_exps.weight"});
        r.push_back({"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"});
        r.push_back({"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"});
        r.push_back({"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"});
        return r;
    }
    if (gemma) {
        r.push_back({"post_attention_layernorm.weight", "post_attention_norm.weight", norm, true});
        r.push_back({"pre_feedforward_layernorm.weight", "ffn_norm.weight", norm, true});
        r.push_back({"post_feedforward_layernorm.weight", "post_ffw_norm.weight", norm, true});
    } else {
        r.push_back({"post_attention_layernorm.weight", "ffn_norm.weight", Transform::none, true});
    }
    if (m.mixtral_names) {
        r.push_back({"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", Transform::none, true});
        r.push_back({"block_sparse_moe.experts.{e}.w1.weight", "ffn_gate_exps.weight"});
        r.push_back({"block_sparse_moe.experts.{e}.w3.weight", "ffn_up_exps.weight"});
        r.push_back({"block_sparse_moe.experts.{e}.w2.weight", "ffn_down_exps.weight"});
        if (d->has_layer_tensor("exp_probs_b.bias"))  // minimax-m2's selection bias (sigmoid router)
            r.push_back({"block_sparse_moe.e_score_correction_bias", "exp_probs_b.bias", Transform::none, true});
    } else if (m.n_experts > 0) {
        r.push_back({"mlp.gate.weight", "ffn_gate_inp.weight", Transform::none, true});
        r.push_back({"mlp.experts.{e}.gate_proj.weight", "ffn_gate_exps.weight"});
        r.push_back({"mlp.experts.{e}.up_proj.weight", "ffn_up_exps.weight"});
        r.push_back({"mlp.experts.{e}.down_proj.weight", "ffn_down_exps.weight"});
        if (d->has_layer_tensor("ffn_gate_inp_shexp.weight")) {  // qwen2moe's gated shared expert
            r.push_back({"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"});
            r.push_back({"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"});
            r.push_back({"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"});
            r.push_back({"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", Transform::none, true, true});
        }
    } else if (fused_gate_up) {
        r.push_back({"mlp.gate_up_proj.weight", "ffn_up.weight"});
        r.push_back({"mlp.down_proj.weight", "ffn_down.weight"});
    } else {
        r.push_back({"mlp.gate_proj.weight", "ffn_gate.weight"});
        r.push_back({"mlp.up_proj.weight", "ffn_up.weight"});
        r.push_back({"mlp.down_proj.weight", "ffn_down.weight"});
    }
    return r;
}

// Parses a decimal index at the start of `s`; returns the digits' length (0: none).
size_t parse_index(std::string_view s, int64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || out < 0) return 0;
    const size_t n = size_t(end - s.data());
    if (n > 1 && s[0] == '0') return 0;  // "01" is not a layer index any writer produces
    return n;
}

}  // namespace

std::optional<TensorTarget> gguf_target(const HfModel& m, std::string_view name) {
    if (m.encoder) return encoder_gguf_target(m, name);
    for (const std::string& p : m.skipped_prefixes)
        if (name.starts_with(p)) return std::nullopt;
    if (name.ends_with(".rotary_emb.inv_freq")) return std::nullopt;  // a buffer older checkpoints saved
    for (const std::string& h : m.head_names)
        if (name == h) {
            if (m.tied) return std::nullopt;  // tied: the head is the embedding, as llama.cpp converts it
            return TensorTarget{"output.weight"};
        }
    for (const std::string& prefix : m.prefixes) {
        if (!name.starts_with(prefix)) continue;
        const std::string_view rest = name.substr(prefix.size());
        if (rest == "embed_tokens.weight") return TensorTarget{"token_embd.weight"};
        if (rest == "norm.weight")
            return TensorTarget{"output_norm.weight", m.norm_plus_one ? Transform::plus_one : Transform::none, -1, true};
        if (m.arch == "gemma4")
            for (const auto& [hf, gguf] : kGemma4Globals)
                if (rest == hf) return TensorTarget{gguf, Transform::none, -1, rest.ends_with("_norm.weight")};
        if (!rest.starts_with("layers.")) break;
        int64_t layer = 0;
        const std::string_view after = rest.substr(7);
        const size_t digits = parse_index(after, layer);
        if (digits && layer >= m.n_layers && layer < m.n_layers + m.nextn_layers) return std::nullopt;  // NextN: not run
        if (!digits || digits >= after.size() || after[digits] != '.' || layer >= m.n_layers) break;
        const std::string_view tail = after.substr(digits + 1);
        // gemma4's KV-sharing layers compute no K/V: transformers ignores such tensors in a checkpoint.
        if (m.first_shared_kv >= 0 && layer >= m.first_shared_kv &&
            (tail == "self_attn.k_proj.weight" || tail == "self_attn.v_proj.weight" || tail == "self_attn.k_norm.weight"))
            return std::nullopt;
        for (const Rule& r : layer_rules(m)) {
            const size_t brace = r.hf.find("{e}");
            TensorTarget t{fmt::format("blk.{}.{}", layer, r.gguf), r.transform, -1, r.force_f32, r.flatten, 0, r.v_heads, r.squeeze};
            if (brace == std::string::npos) {
                if (tail == r.hf) return t;
                continue;
            }
            const std::string_view head = std::string_view(r.hf).substr(0, brace), back = std::string_view(r.hf).substr(brace + 3);
            if (!tail.starts_with(head) || !tail.ends_with(back) || tail.size() <= head.size() + back.size()) continue;
            const std::string_view index = tail.substr(head.size(), tail.size() - head.size() - back.size());
            int64_t e = 0;
            if (parse_index(index, e) != index.size() || e >= m.n_experts) continue;
            t.expert = e;
            return t;
        }
        break;
    }
    fail("tensor '{}' is not a tensor pagoda knows for {}", name, m.hf_arch);
}

HfSource hf_source(const HfModel& m, const std::string& name) {
    if (m.encoder) return encoder_hf_source(m, name);
    const std::string& prefix = m.prefixes.front();
    if (name == "token_embd.weight") return {{prefix + "embed_tokens.weight"}};
    if (name == "output_norm.weight") return {{prefix + "norm.weight"}, m.norm_plus_one ? Transform::plus_one : Transform::none};
    if (name == "output.weight") return {{m.head_names.front()}};
    if (m.arch == "gemma4")
        for (const auto& [hf, gguf] : kGemma4Globals)
            if (name == gguf) return {{prefix + hf}};
    int64_t layer = 0;
    if (name.starts_with("blk.")) {
        const std::string_view after = std::string_view(name).substr(4);
        const size_t digits = parse_index(after, layer);
        if (digits && digits < after.size() && after[digits] == '.') {
            const std::string tail(after.substr(digits + 1));
            for (const Rule& r : layer_rules(m)) {
                if (tail != r.gguf) continue;
                HfSource s;
                s.transform = r.transform;
                s.flatten_to_row = r.flatten;
                s.v_heads = r.v_heads;
                s.unsqueeze = r.squeeze;
                const std::string base = fmt::format("{}layers.{}.", prefix, layer);
                const size_t brace = r.hf.find("{e}");
                if (brace == std::string::npos) {
                    s.hf_names.push_back(base + r.hf);
                } else {
                    for (int64_t e = 0; e < m.n_experts; ++e)
                        s.hf_names.push_back(base + r.hf.substr(0, brace) + std::to_string(e) + r.hf.substr(brace + 3));
                }
                return s;
            }
        }
    }
    fail("tensor '{}' has no Hugging Face name for {}", name, m.hf_arch);
}

// Head h's HF row (half, i) — half in {0, 1}, i < rows/2 — is GGUF row (i, half): llama.cpp's
// converter reshapes each head's rows [2, d/2] to [d/2, 2] so RoPE rotates adjacent pairs.
void permute_rows_to_pairs(const uint8_t* in, uint8_t* out, int64_t n_heads, int64_t rows, uint64_t row_bytes) {
    const int64_t per_head = rows / n_heads, half = per_head / 2;
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t s = 0; s < 2; ++s)
            for (int64_t i = 0; i < half; ++i)
                std::memcpy(out + uint64_t(h * per_head + 2 * i + s) * row_bytes, in + uint64_t(h * per_head + s * half + i) * row_bytes,
                            row_bytes);
}

void permute_rows_to_halves(const uint8_t* in, uint8_t* out, int64_t n_heads, int64_t rows, uint64_t row_bytes) {
    const int64_t per_head = rows / n_heads, half = per_head / 2;
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t s = 0; s < 2; ++s)
            for (int64_t i = 0; i < half; ++i)
                std::memcpy(out + uint64_t(h * per_head + s * half + i) * row_bytes, in + uint64_t(h * per_head + 2 * i + s) * row_bytes,
                            row_bytes);
}

}  // namespace pagoda::hf
