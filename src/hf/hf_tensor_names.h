// Hugging Face tensor names <-> GGUF tensor names (llama.cpp's), with the transform each needs:
// llama-family Q/K rows permuted from rotate-half order to adjacent pairs, Gemma's RMSNorm weights
// stored as w (GGUF: 1 + w), per-expert matrices stacked into ffn_*_exps, 1-D tensors and the
// expert router in F32, qwen2moe's [1, dim] shared-expert gate flattened.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hf/hf_config.h"
#include "hf/hf_qwen35.h"

namespace pagoda::hf {

// neg_exp: qwen35's A_log -> ssm_a = -exp(A_log) (hf_qwen35.h's ssm_a_of; the writer inverts it exactly).
// split_kv_b: deepseek2's kv_b_proj (GGUF name attn_kv_b) becomes attn_k_b + attn_v_b (hf_deepseek.h).
// gpt-oss's experts (hf_gpt_oss.h): mxfp4 (`*_blocks` + `*_scales` -> MXFP4), experts_io (the
// dequantised [E, in, out] matrices), gate_up_bias (interleaved gate / up biases); a fused gate_up
// GGUF name comes back as ffn_gate_exps + ffn_up_exps.
enum class Transform { none, permute_q, permute_k, plus_one, neg_exp, split_kv_b, mxfp4, experts_io, gate_up_bias };

struct TensorTarget {
    std::string gguf_name;
    Transform transform = Transform::none;
    int64_t expert = -1;   // >= 0: this HF tensor is expert `expert` of the stacked GGUF tensor
    bool force_f32 = false;  // the GGUF tensor is F32 whatever the HF dtype (1-D tensors, the router)
    bool flatten = false;    // HF [1, n] -> GGUF [n] (qwen2moe's shared-expert gate)
    int64_t skip_rows = 0;   // the GGUF tensor drops the HF tensor's first rows (RoBERTa's position offset)
    VHeads v_heads = VHeads::none;  // qwen35: value heads go from grouped to tiled order
    bool squeeze = false;    // HF [C, 1, K] -> GGUF [K, C] (qwen35's conv1d)
};

// The GGUF tensor an HF tensor becomes; nullopt for tensors that are not loaded (other towers,
// rotary inv_freq buffers, a tied model's redundant lm_head). Throws naming an unknown tensor.
std::optional<TensorTarget> gguf_target(const HfModel& model, std::string_view hf_name);

// The inverse, for writing a folder: the HF names of a GGUF tensor (n_experts names for a stacked
// expert tensor, in expert order) and its transform. Throws naming a tensor with no HF form.
struct HfSource {
    std::vector<std::string> hf_names;
    Transform transform = Transform::none;
    bool flatten_to_row = false;  // qwen2moe's shared-expert gate: GGUF [dim] is HF [1, dim]
    int64_t pad_rows = 0;         // HF has this many (zero) rows before the GGUF tensor's (skip_rows' inverse)
    VHeads v_heads = VHeads::none;  // value heads go back from tiled to grouped order
    bool unsqueeze = false;       // GGUF [K, C] is HF [C, 1, K]
};
HfSource hf_source(const HfModel& model, const std::string& gguf_name);

// The encoders' halves of gguf_target / hf_source (hf_encoder_names.cpp; model.encoder is true):
// BERT / RoBERTa names as llama.cpp's converter maps them (hf_encoder_config.h).
std::optional<TensorTarget> encoder_gguf_target(const HfModel& model, std::string_view hf_name);
HfSource encoder_hf_source(const HfModel& model, const std::string& gguf_name);

// Q/K rows: rotate-half (HF) -> adjacent pairs (GGUF) and back, for `n_heads` heads of `row_bytes` rows.
void permute_rows_to_pairs(const uint8_t* in, uint8_t* out, int64_t n_heads, int64_t rows, uint64_t row_bytes);
void permute_rows_to_halves(const uint8_t* in, uint8_t* out, int64_t n_heads, int64_t rows, uint64_t row_bytes);

}  // namespace pagoda::hf
