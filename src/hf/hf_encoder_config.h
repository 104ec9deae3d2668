// Hugging Face BERT-family encoder folders <-> llama.cpp's GGUF `bert` form, as its converter
// (convert_hf_to_gguf.py: BertModel, RobertaModel, XLMRobertaModel) maps them: BertModel,
// BertForSequenceClassification, RobertaModel, RobertaForSequenceClassification, XLMRobertaModel and
// XLMRobertaForSequenceClassification all become `bert` with bert.attention.causal false,
// bert.attention.layer_norm_epsilon, tokenizer.ggml.token_type_count (type_vocab_size) and, for
// RoBERTa / XLM-R, a context of max_position_embeddings - (pad_token_id + 1): the converter drops the
// position table's first pad_token_id + 1 rows (RoBERTa numbers positions from padding_idx + 1).
// Pooling: {arch}.pooling_type from sentence-transformers' modules.json and its Pooling module's
// config.json (mean, then cls, then last, the converter's order), or 4 (rank) for a
// *ForSequenceClassification, whose id2label become {arch}.classifier.output_labels (not the two
// placeholder labels LABEL_0, LABEL_1 transformers adds by default).
// One difference from the converter, on purpose: BertForSequenceClassification's pooler
// (tanh(pooler.dense · h_cls)) becomes cls.weight/bias and its classifier cls.output, which is what
// transformers computes; the converter drops the pooler, so its GGUF scores differ from the model's.
// NomicBertModel becomes `nomic-bert` (hf_nomic_bert.h). Errors name the file and the key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "hf/hf_config.h"

namespace pagoda::hf {

bool is_encoder_class(std::string_view hf_arch);
std::string encoder_class_list();  // "BertModel, BertForSequenceClassification, ..."

// config.json (parsed) of an encoder class -> HfModel with arch "bert".
HfModel read_hf_encoder_config(const nlohmann::json& root, const std::string& name, const std::string& hf_arch);

// sentence-transformers: the path of modules.json's sentence_transformers.models.Pooling module
// (nullopt when it lists none); a path that leaves the folder is refused.
std::optional<std::string> pooling_module_path(std::string_view modules_json, const std::string& name);
// A Pooling module's config.json -> llama.cpp's pooling_type: 1 mean, 2 cls, 3 last.
int64_t pooling_type_of(std::string_view pooling_config_json, const std::string& name);
// For an encoder that is not a classifier: adds {arch}.pooling_type when DIR/modules.json names a
// Pooling module (a folder without modules.json gets no key, as the converter writes none).
void add_sentence_transformers_pooling(HfModel& m, const std::string& dir);

// The inverse, for writing a folder from a GGUF `bert` model. `hf_class` "" picks one: XLMRoberta*
// for a "t5" (Unigram) vocabulary, else Bert*; *ForSequenceClassification for pooling_type 4.
// A `nomic-bert` model is NomicBertModel (its only class).
std::string encoder_class_for(const gguf::File& model, const std::string& hf_class);
std::string hf_encoder_config_json(const gguf::File& model, const std::string& torch_dtype, const std::string& hf_class);
// modules.json and 1_Pooling/config.json (relative path, text) for a pooling_type of 1, 2 or 3; none
// otherwise (a classifier, or no pooling key).
std::vector<std::pair<std::string, std::string>> sentence_transformers_files(const gguf::File& model);

}  // namespace pagoda::hf
