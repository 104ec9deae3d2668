// Hugging Face JinaBertModel / JinaBertForMaskedLM folders (jina-embeddings-v2 -en form) <->
// llama.cpp's GGUF `jina-bert-v2`: post-norm BERT blocks with Q/K/V/output biases, no position table
// (ALiBi: config position_embedding_type "alibi"; pagoda's builder fixes the max bias at 8 as llama.cpp
// does) and a GEGLU FFN (feed_forward_type "geglu"): mlp.gated_layers, 2 x intermediate_size rows
// with the gate's rows first, is kept fused as ffn_up (the builder's fused form, gate first);
// mlp.wo is ffn_down, mlp.layernorm layer_output_norm. Tensors have no prefix ("bert." is accepted).
// Dropped: embeddings.position_ids, pooler.*, cls.predictions.* (the masked-LM head).
// Refused by name: feed_forward_type other than geglu (reglu, ...), position_embedding_type other than
// alibi, hidden_act other than gelu, is_decoder, and the -code form's tensors (mlp.up_gated_layer,
// layer_norm_q / _k / _1 / _2), whose up-first fused FFN has no mapping here yet; a GGUF with
// separate ffn_gate (that form) or a classifier head (jina-reranker-v1) is refused when writing.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "hf/hf_config.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf {

bool is_jina_bert_class(std::string_view hf_arch);  // JinaBertModel, JinaBertForMaskedLM

// config.json (parsed) of a JinaBertModel -> HfModel with arch "jina-bert-v2".
HfModel read_hf_jina_bert_config(const nlohmann::json& root, const std::string& name, const std::string& hf_arch);
// The config.json a GGUF `jina-bert-v2` model stands for (the inverse of read_hf_jina_bert_config).
std::string hf_jina_bert_config_json(const gguf::File& model, const std::string& torch_dtype);

// Tensor names both ways; nullopt for a tensor not loaded, an error for an unknown one.
std::optional<TensorTarget> jina_bert_gguf_target(const HfModel& model, std::string_view hf_name);
HfSource jina_bert_hf_source(const HfModel& model, const std::string& gguf_name);

}  // namespace pagoda::hf
