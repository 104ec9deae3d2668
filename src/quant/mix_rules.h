// llama-quantize's K-quant mixes: which layer tensors of a dense llama-family model get more bits
// than the mix's base type, as llama.cpp's llama-quant.cpp chooses them (facts, restated):
//   q4_k_m  base Q4_K; attn_v and ffn_down of the "more bits" layers (the first and last eighth of
//           the layers and every third between) Q6_K
//   q5_k    (Q5_K_S) base Q5_K everywhere
//   q5_k_m  base Q5_K; attn_v and ffn_down of the more-bits layers Q6_K
//   q3_k_m  base Q3_K; attn_v Q5_K in layers 0 and 1, else Q4_K; ffn_down Q5_K in the first
//           sixteenth of the layers, else Q4_K; attn_output Q4_K
// The experts' stacked down projections (ffn_down_exps) and qwen2moe's shared one (ffn_down_shexp)
// count as ffn_down, as in llama.cpp. Not carried over: llama.cpp's extra bumps for 70B-sized models
// (attn_v Q5_K) and for 8-expert models (their attention projections get more bits there). The
// output head and token embedding are quantize_model's rules, the same for every target.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

struct MixChoice {
    gguf::GgmlType type;
    std::string rule;  // why, for the report ("q3_k_m: attn_v of layers 0-1")
};

// The type the mix `target` (a quantize target name) gives the tensor `role` (its name after
// "blk.N.", e.g. "attn_v.weight") of layer `layer` out of `n_layers`; nullopt where the target's base
// type applies (and for every target that is not a mix).
std::optional<MixChoice> mix_layer_type(const std::string& target, const std::string& role, int64_t layer,
                                        int64_t n_layers);

// llama.cpp's use_more_bits(): the first and last eighth of the layers, and every third between.
bool more_bits_layer(int64_t layer, int64_t n_layers);

}  // namespace pagoda::quant
