// The tensor manifests of arch_descriptions.cpp, one list per family (a layer's names without their
// "blk.N." prefix). R: every layer has it; O: some layers or files; D: every dense-FFN layer; E: every
// layer with experts. Only arch_descriptions.cpp includes this.
#pragma once
#include "arch/arch_description.h"

namespace pagoda::arch::tensors {

constexpr Presence R = Presence::required, O = Presence::optional, D = Presence::dense, E = Presence::experts;

// Outside the layers. rope_freqs: llama3 scaling's divisors (llama), proportional RoPE (gemma4).
constexpr TensorEntry kDecoderGlobals[] = {
    {"token_embd.weight", R}, {"output_norm.weight", R}, {"output.weight", O}, {"rope_freqs.weight", O}};
constexpr TensorEntry kPhi3Globals[] = {{"token_embd.weight", R},          {"output_norm.weight", R},
                                        {"output.weight", O},              {"rope_factors_short.weight", O},
                                        {"rope_factors_long.weight", O}};
constexpr TensorEntry kGemma4Globals[] = {{"token_embd.weight", R},           {"output_norm.weight", R},
                                          {"output.weight", O},               {"rope_freqs.weight", O},
                                          {"per_layer_token_embd.weight", O}, {"per_layer_model_proj.weight", O},
                                          {"per_layer_proj_norm.weight", O}};
constexpr TensorEntry kEncoderGlobals[] = {{"token_embd.weight", R},      {"token_embd_norm.weight", R},
                                           {"token_embd_norm.bias", R},   {"token_types.weight", O},
                                           {"position_embd.weight", O}};

// llama; Mixtral's experts where the file has them.
constexpr TensorEntry kLlamaLayer[] = {
    {"attn_norm.weight", R},     {"attn_q.weight", R},        {"attn_k.weight", R},         {"attn_v.weight", R},
    {"attn_output.weight", R},   {"ffn_norm.weight", R},      {"ffn_gate.weight", D},       {"ffn_up.weight", D},
    {"ffn_down.weight", D},      {"ffn_gate_inp.weight", E},  {"ffn_gate_exps.weight", E},  {"ffn_up_exps.weight", E},
    {"ffn_down_exps.weight", E}, {"ffn_gate_up_exps.weight", O}};
// smollm3, mistral3: llama's dense layer.
constexpr TensorEntry kLlamaDenseLayer[] = {
    {"attn_norm.weight", R}, {"attn_q.weight", R},   {"attn_k.weight", R},     {"attn_v.weight", R},
    {"attn_output.weight", R}, {"ffn_norm.weight", R}, {"ffn_gate.weight", R}, {"ffn_up.weight", R},
    {"ffn_down.weight", R}};
constexpr TensorEntry kQwen2Layer[] = {
    {"attn_norm.weight", R},   {"attn_q.weight", R},   {"attn_k.weight", R},   {"attn_v.weight", R},
    {"attn_q.bias", R},        {"attn_k.bias", R},     {"attn_v.bias", R},     {"attn_output.weight", R},
    {"ffn_norm.weight", R},    {"ffn_gate.weight", R}, {"ffn_up.weight", R},   {"ffn_down.weight", R}};
constexpr TensorEntry kQwen2MoeLayer[] = {
    {"attn_norm.weight", R},        {"attn_q.weight", R},          {"attn_k.weight", R},
    {"attn_v.weight", R},           {"attn_q.bias", R},            {"attn_k.bias", R},
    {"attn_v.bias", R},             {"attn_output.weight", R},     {"ffn_norm.weight", R},
    {"ffn_gate_inp.weight", E},     {"ffn_gate_exps.weight", E},   {"ffn_up_exps.weight", E},
    {"ffn_down_exps.weight", E},    {"ffn_gate_up_exps.weight", O}, {"ffn_gate_inp_shexp.weight", E},
    {"ffn_gate_shexp.weight", E},   {"ffn_up_shexp.weight", E},    {"ffn_down_shexp.weight", E}};
constexpr TensorEntry kQwen3Layer[] = {
    {"attn_norm.weight", R},   {"attn_q.weight", R},      {"attn_k.weight", R},   {"attn_v.weight", R},
    {"attn_q_norm.weight", R}, {"attn_k_norm.weight", R}, {"attn_output.weight", R}, {"ffn_norm.weight", R},
    {"ffn_gate.weight", R},    {"ffn_up.weight", R},      {"ffn_down.weight", R}};
constexpr TensorEntry kQwen3MoeLayer[] = {
    {"attn_norm.weight", R},      {"attn_q.weight", R},        {"attn_k.weight", R},      {"attn_v.weight", R},
    {"attn_q_norm.weight", R},    {"attn_k_norm.weight", R},   {"attn_output.weight", R}, {"ffn_norm.weight", R},
    {"ffn_gate_inp.weight", E},   {"ffn_gate_exps.weight", E}, {"ffn_up_exps.weight", E}, {"ffn_down_exps.weight", E},
    {"ffn_gate_up_exps.weight", O}};
// gemma2; gemma3 adds per-head Q/K norms.
constexpr TensorEntry kGemma2Layer[] = {
    {"attn_norm.weight", R},     {"attn_q.weight", R},      {"attn_k.weight", R},   {"attn_v.weight", R},
    {"attn_output.weight", R},   {"post_attention_norm.weight", R}, {"ffn_norm.weight", R},
    {"ffn_gate.weight", R},      {"ffn_up.weight", R},      {"ffn_down.weight", R}, {"post_ffw_norm.weight", R}};
constexpr TensorEntry kGemma3Layer[] = {
    {"attn_norm.weight", R},   {"attn_q.weight", R},          {"attn_k.weight", R},   {"attn_v.weight", R},
    {"attn_q_norm.weight", R}, {"attn_k_norm.weight", R},     {"attn_output.weight", R},
    {"post_attention_norm.weight", R}, {"ffn_norm.weight", R}, {"ffn_gate.weight", R}, {"ffn_up.weight", R},
    {"ffn_down.weight", R},    {"post_ffw_norm.weight", R}};
// gemma4: KV-sharing layers have no K/V; V = K where attn_v is absent; the 26B-A4B's layers run the
// dense FFN and the experts side by side; the E2B/E4B's per-layer embedding parts (inp_gate, proj,
// post_norm).
constexpr TensorEntry kGemma4Layer[] = {
    {"attn_norm.weight", R},        {"attn_q.weight", R},            {"attn_k.weight", O},
    {"attn_v.weight", O},           {"attn_q_norm.weight", R},       {"attn_k_norm.weight", O},
    {"attn_output.weight", R},      {"post_attention_norm.weight", R}, {"ffn_norm.weight", R},
    {"ffn_gate.weight", R},         {"ffn_up.weight", R},            {"ffn_down.weight", R},
    {"post_ffw_norm.weight", R},    {"layer_output_scale.weight", O}, {"ffn_gate_inp.weight", E},
    {"ffn_gate_inp.scale", E},      {"ffn_gate_up_exps.weight", E},  {"ffn_gate_exps.weight", O},
    {"ffn_up_exps.weight", O},      {"ffn_down_exps.weight", E},     {"ffn_down_exps.scale", O},
    {"pre_ffw_norm_2.weight", E},   {"post_ffw_norm_1.weight", E},   {"post_ffw_norm_2.weight", E},
    {"inp_gate.weight", O},         {"proj.weight", O},              {"post_norm.weight", O}};
// phi3: fused Q/K/V (separate ones in some files) and a fused gate|up ffn_up.
constexpr TensorEntry kPhi3Layer[] = {
    {"attn_norm.weight", R}, {"attn_qkv.weight", O}, {"attn_q.weight", O},   {"attn_k.weight", O},
    {"attn_v.weight", O},    {"attn_output.weight", R}, {"ffn_norm.weight", R}, {"ffn_up.weight", R},
    {"ffn_down.weight", R}};
constexpr TensorEntry kGptOssLayer[] = {
    {"attn_norm.weight", R},      {"attn_q.weight", R},        {"attn_k.weight", R},
    {"attn_v.weight", R},         {"attn_q.bias", R},          {"attn_k.bias", R},
    {"attn_v.bias", R},           {"attn_output.weight", R},   {"attn_output.bias", R},
    {"attn_sinks.weight", R},     {"post_attention_norm.weight", R}, {"ffn_gate_inp.weight", E},
    {"ffn_gate_inp.bias", E},     {"ffn_gate_exps.weight", E}, {"ffn_gate_exps.bias", E},
    {"ffn_up_exps.weight", E},    {"ffn_up_exps.bias", E},     {"ffn_down_exps.weight", E},
    {"ffn_down_exps.bias", E},    {"ffn_gate_up_exps.weight", O}, {"ffn_gate_up_exps.bias", O}};
// The NextN (multi-token prediction) block's own tensors: stored in the trailing blocks, not run.
#define PAGODA_NEXTN_TENSORS                                                                   \
    {"nextn.eh_proj.weight", O}, {"nextn.enorm.weight", O}, {"nextn.hnorm.weight", O},          \
        {"nextn.shared_head_norm.weight", O}, {"nextn.embed_tokens.weight", O},                 \
        {"nextn.shared_head_head.weight", O}
// deepseek2: Q through a low-rank bottleneck (q_a, q_a_norm, q_b) or one attn_q; K's no-RoPE part and
// V from the latent through attn_kv_b or its split attn_k_b / attn_v_b; leading dense layers.
constexpr TensorEntry kDeepseek2Layer[] = {
    {"attn_norm.weight", R},       {"attn_q_a.weight", O},        {"attn_q_a_norm.weight", O},
    {"attn_q_b.weight", O},        {"attn_q.weight", O},          {"attn_kv_a_mqa.weight", R},
    {"attn_kv_a_norm.weight", R},  {"attn_kv_b.weight", O},       {"attn_k_b.weight", O},
    {"attn_v_b.weight", O},        {"attn_output.weight", R},     {"ffn_norm.weight", R},
    {"ffn_gate.weight", D},        {"ffn_up.weight", D},          {"ffn_down.weight", D},
    {"ffn_gate_inp.weight", E},    {"exp_probs_b.bias", O},       {"ffn_gate_exps.weight", E},
    {"ffn_up_exps.weight", E},     {"ffn_down_exps.weight", E},   {"ffn_gate_up_exps.weight", O},
    {"ffn_gate_shexp.weight", O},  {"ffn_up_shexp.weight", O},    {"ffn_down_shexp.weight", O},
    PAGODA_NEXTN_TENSORS};
// glm4moe: optional Q/K/V biases and Q/K norms; the FFN's input norm is post_attention_norm.
constexpr TensorEntry kGlm4MoeLayer[] = {
    {"attn_norm.weight", R},      {"attn_q.weight", R},         {"attn_k.weight", R},
    {"attn_v.weight", R},         {"attn_q.bias", O},           {"attn_k.bias", O},
    {"attn_v.bias", O},           {"attn_q_norm.weight", O},    {"attn_k_norm.weight", O},
    {"attn_output.weight", R},    {"post_attention_norm.weight", R}, {"ffn_gate.weight", D},
    {"ffn_up.weight", D},         {"ffn_down.weight", D},       {"ffn_gate_inp.weight", E},
    {"exp_probs_b.bias", O},      {"ffn_gate_exps.weight", E},  {"ffn_up_exps.weight", E},
    {"ffn_down_exps.weight", E},  {"ffn_gate_up_exps.weight", O}, {"ffn_gate_shexp.weight", O},
    {"ffn_up_shexp.weight", O},   {"ffn_down_shexp.weight", O}, PAGODA_NEXTN_TENSORS};
// minimax-m2: Q/K RMSNorms over the whole projected rows (attn_q_norm [n_head x head_dim],
// attn_k_norm [n_head_kv x head_dim]); every layer routed experts with the selection bias exp_probs_b.
constexpr TensorEntry kMiniMaxM2Layer[] = {
    {"attn_norm.weight", R},     {"attn_q.weight", R},        {"attn_k.weight", R},      {"attn_v.weight", R},
    {"attn_q_norm.weight", R},   {"attn_k_norm.weight", R},   {"attn_output.weight", R}, {"ffn_norm.weight", R},
    {"ffn_gate_inp.weight", E},  {"exp_probs_b.bias", E},     {"ffn_gate_exps.weight", E}, {"ffn_up_exps.weight", E},
    {"ffn_down_exps.weight", E}, {"ffn_gate_up_exps.weight", O}};
// glm4: sandwich norms, fused gate|up ffn_up; Q/K/V biases where the file has them; older files'
// fused attn_qkv in place of attn_q/k/v.
constexpr TensorEntry kGlm4Layer[] = {
    {"attn_norm.weight", R},   {"attn_q.weight", R},   {"attn_k.weight", R},          {"attn_v.weight", R},
    {"attn_qkv.weight", O},    {"attn_q.bias", O},     {"attn_k.bias", O},            {"attn_v.bias", O},
    {"attn_output.weight", R}, {"post_attention_norm.weight", R}, {"ffn_norm.weight", R},
    {"ffn_up.weight", R},      {"ffn_down.weight", R}, {"post_ffw_norm.weight", R}};
// qwen35 / qwen35moe: every 4th layer full (gated) attention, the others a gated DeltaNet.
#define PAGODA_QWEN35_ATTENTION                                                                           \
    {"attn_norm.weight", R}, {"post_attention_norm.weight", R}, {"attn_q.weight", O}, {"attn_k.weight", O}, \
        {"attn_v.weight", O}, {"attn_output.weight", O}, {"attn_q_norm.weight", O}, {"attn_k_norm.weight", O}, \
        {"attn_qkv.weight", O}, {"attn_gate.weight", O}, {"ssm_a", O}, {"ssm_alpha.weight", O},            \
        {"ssm_beta.weight", O}, {"ssm_conv1d.weight", O}, {"ssm_dt.bias", O}, {"ssm_norm.weight", O},      \
        {"ssm_out.weight", O}
constexpr TensorEntry kQwen35Layer[] = {
    PAGODA_QWEN35_ATTENTION, {"ffn_gate.weight", R}, {"ffn_up.weight", R}, {"ffn_down.weight", R}, PAGODA_NEXTN_TENSORS};
constexpr TensorEntry kQwen35MoeLayer[] = {
    PAGODA_QWEN35_ATTENTION,        {"ffn_gate_inp.weight", E},   {"ffn_gate_exps.weight", O},
    {"ffn_up_exps.weight", O},      {"ffn_gate_up_exps.weight", O}, {"ffn_down_exps.weight", E},
    {"ffn_gate_inp_shexp.weight", O}, {"ffn_gate_shexp.weight", O}, {"ffn_up_shexp.weight", O},
    {"ffn_down_shexp.weight", O},   PAGODA_NEXTN_TENSORS};
// qwen3next: the attention layers of qwen35moe; DeltaNet projections fused (ssm_in in older files,
// attn_qkv + attn_gate since the converter splits it; ssm_ba); experts and the gated shared expert in
// every layer.
constexpr TensorEntry kQwen3NextLayer[] = {
    {"attn_norm.weight", R},        {"post_attention_norm.weight", R}, {"attn_q.weight", O},
    {"attn_k.weight", O},           {"attn_v.weight", O},            {"attn_output.weight", O},
    {"attn_q_norm.weight", O},      {"attn_k_norm.weight", O},       {"ssm_in.weight", O},
    {"attn_qkv.weight", O},         {"attn_gate.weight", O},         {"ssm_a", O},
    {"ssm_ba.weight", O},           {"ssm_conv1d.weight", O},        {"ssm_dt.bias", O},
    {"ssm_norm.weight", O},         {"ssm_out.weight", O},           {"ffn_gate_inp.weight", E},
    {"ffn_gate_exps.weight", O},    {"ffn_up_exps.weight", O},       {"ffn_gate_up_exps.weight", O},
    {"ffn_down_exps.weight", E},    {"ffn_gate_inp_shexp.weight", E}, {"ffn_gate_shexp.weight", E},
    {"ffn_up_shexp.weight", E},     {"ffn_down_shexp.weight", E},    PAGODA_NEXTN_TENSORS};
#undef PAGODA_QWEN35_ATTENTION
#undef PAGODA_NEXTN_TENSORS
// bert, nomic-bert, jina-bert-v2 (one builder): separate or fused Q/K/V, biases where the file has
// them, a GEGLU/SwiGLU gate where the family has one; jina-bert-v2 also its optional whole-row Q/K
// LayerNorms and attn_norm_2 (the -code form).
#define PAGODA_ENCODER_TENSORS                                                                            \
    {"attn_q.weight", O}, {"attn_k.weight", O}, {"attn_v.weight", O}, {"attn_qkv.weight", O},              \
        {"attn_q.bias", O}, {"attn_k.bias", O}, {"attn_v.bias", O}, {"attn_qkv.bias", O},                  \
        {"attn_output.weight", R}, {"attn_output.bias", O}, {"attn_output_norm.weight", R},                \
        {"attn_output_norm.bias", R}, {"ffn_gate.weight", O}, {"ffn_up.weight", R}, {"ffn_up.bias", O},     \
        {"ffn_down.weight", R}, {"ffn_down.bias", O}, {"layer_output_norm.weight", R},                     \
        {"layer_output_norm.bias", R}
constexpr TensorEntry kEncoderLayer[] = {PAGODA_ENCODER_TENSORS};
constexpr TensorEntry kJinaBertLayer[] = {PAGODA_ENCODER_TENSORS,       {"attn_q_norm.weight", O},
                                          {"attn_q_norm.bias", O},      {"attn_k_norm.weight", O},
                                          {"attn_k_norm.bias", O},      {"attn_norm_2.weight", O},
                                          {"attn_norm_2.bias", O}};
#undef PAGODA_ENCODER_TENSORS

}  // namespace pagoda::arch::tensors
