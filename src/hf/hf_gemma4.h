// Gemma 4 (Gemma4ForCausalLM, and Gemma4ForConditionalGeneration's text_config with its
// `model.language_model.` tensors; the vision and audio towers are not loaded) as GGUF `gemma4`, the
// way llama.cpp's converter (Gemma4Model over Gemma3Model) hands it over: norms stored as used (no
// +1: Gemma4RMSNorm multiplies by w), head_dim / global_head_dim as the sliding / full layers'
// key_length_swa / key_length, layer_types as the bool sliding_window_pattern, one KV-head count a
// layer where num_global_key_value_heads is set, rope_parameters' two bases, the full layers'
// "proportional" RoPE as rope_freqs.weight (1 on the rotated partial_rotary_factor of the head's
// frequencies, 1e30 on the rest), num_kv_shared_layers, final_logit_softcapping, per-layer
// embeddings (hidden_size_per_layer_input), use_double_wide_mlp's doubled widths on the KV-sharing
// layers, and the 26B-A4B's experts (enable_moe_block: num_experts, top_k_experts,
// moe_intermediate_size; router.scale / per_expert_scale as ffn_gate_inp.scale / ffn_down_exps.scale).
// What transformers' Gemma4TextModel would compute differently from pagoda's builder is refused naming
// the key.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "hf/hf_config.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::hf {

// The whole of read_hf_config for a Gemma 4 class (`root` is config.json; for the multimodal class
// the decoder's keys are its text_config), Gemma4TextConfig's defaults filling what the file leaves out.
HfModel read_gemma4_config(const nlohmann::json& root, const std::string& name, const std::string& hf_arch, bool multimodal);

// The inverse, for hf_config_json: Gemma4ForCausalLM's config.json for a gemma4 GGUF. Throws naming
// the metadata or tensor that config.json cannot state.
std::string gemma4_config_json(const gguf::File& f, const std::string& torch_dtype);

}  // namespace pagoda::hf
