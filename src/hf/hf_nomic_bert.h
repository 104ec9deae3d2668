// Hugging Face NomicBertModel folders (nomic-embed-text-v1 / v1.5) <-> llama.cpp's GGUF `nomic-bert`,
// as its converter maps them: post-norm, bidirectional, NEOX RoPE on Q and K (rotary_emb_base ->
// nomic-bert.rope.freq_base), one fused Wqkv, SwiGLU (mlp.fc11 up, mlp.fc12 gate, mlp.fc2 down), no
// biases. Config keys are GPT-2 style: n_embd, n_head, n_layer, n_inner, layer_norm_epsilon.
// Context: max_trained_positions (n_positions when absent); the converter writes 2048, which is
// v1/v1.5's max_trained_positions (n_positions 8192 assumes RoPE scaling, which pagoda does not do).
// Refused by key, as the converter asserts them away: activation_function other than swiglu, causal,
// prenorm, any bias, partial or interleaved rotary, rotary scaling, RMS norm, parallel blocks, MoE.
// Tensors have no prefix ("bert." is accepted too); embeddings.position_ids is dropped.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf {

// config.json (parsed) of a NomicBertModel -> HfModel with arch "nomic-bert".
HfModel read_hf_nomic_config(const nlohmann::json& root, const std::string& name);
// The config.json a GGUF `nomic-bert` model stands for (the inverse of read_hf_nomic_config).
std::string hf_nomic_config_json(const gguf::File& model, const std::string& torch_dtype);

// Tensor names both ways; nullopt for a tensor the converter drops, an error for an unknown one.
std::optional<TensorTarget> nomic_gguf_target(const HfModel& model, std::string_view hf_name);
HfSource nomic_hf_source(const HfModel& model, const std::string& gguf_name);

}  // namespace pagoda::hf
