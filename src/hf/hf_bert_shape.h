// The config.json keys the BERT-style encoder folders (bert / roberta / xlm-roberta, jina-bert-v2)
// share, in both directions: reading the shape (layers, width, full multi-head attention, gelu) into
// an HfModel, and writing it, with the norm epsilon and vocabulary sizes, from GGUF `<arch>.*` keys.
#pragma once
#include <cstdint>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"
#include "hf/config_reader.h"
#include "hf/hf_config.h"

namespace pagoda::hf::detail {

// Sets m's layers and heads; refuses a width that does not split into the heads or an activation
// other than gelu (`builder` names pagoda's builder in the error). Returns the width.
inline int64_t read_bert_shape(const Config& c, HfModel& m, const std::string& builder) {
    m.n_layers = c.positive("num_hidden_layers");
    const int64_t dim = c.positive("hidden_size");
    m.n_heads = c.positive("num_attention_heads");
    if (dim % m.n_heads) c.refuse("hidden_size", "is not a multiple of num_attention_heads");
    m.n_kv_heads = m.n_heads;
    m.head_dim = dim / m.n_heads;
    const std::string act = c.string_or("hidden_act", "gelu");
    if (act != "gelu") c.refuse("hidden_act", "is '" + act + "', but pagoda's " + builder + " builder computes gelu");
    return dim;
}

// The shape keys from GGUF `arch`'s metadata and tensors; `type_count` is the token type count when
// the file has neither a token_types tensor nor tokenizer.ggml.token_type_count.
inline void write_bert_shape(const gguf::File& f, const std::string& arch, int64_t type_count, nlohmann::json& j) {
    j["_name_or_path"] = f.get_string_or("general.name", "");
    j["hidden_size"] = f.get_int(arch + ".embedding_length");
    j["num_hidden_layers"] = f.get_int(arch + ".block_count");
    j["num_attention_heads"] = f.get_int(arch + ".attention.head_count");
    j["intermediate_size"] = f.get_int(arch + ".feed_forward_length");
    j["hidden_act"] = "gelu";
    // The f32's shortest decimal (1e-12, not 9.99999996e-13), which reads back to the same f32.
    j["layer_norm_eps"] = std::stod(fmt::format("{}", float(f.get_float_or(arch + ".attention.layer_norm_epsilon", 1e-12))));
    if (const auto* e = f.find_tensor("token_embd.weight")) j["vocab_size"] = e->shape.size() == 2 ? e->shape[1] : 0;
    const gguf::TensorInfo* types = f.find_tensor("token_types.weight");
    j["type_vocab_size"] =
        types && types->shape.size() == 2 ? types->shape[1] : f.get_int_or("tokenizer.ggml.token_type_count", type_count);
}

}  // namespace pagoda::hf::detail
