// JinaBertModel config.json and tensor names <-> GGUF `jina-bert-v2`, as hf_jina_bert.h says.
#include "hf/hf_jina_bert.h"

#include <fmt/format.h>

#include "core/error.h"
#include "hf/config_reader.h"
#include "hf/hf_bert_shape.h"
#include "hf/hf_name_pairs.h"

namespace pagoda::hf {
namespace {

using detail::Config;
using gguf::Value;

using Pair = detail::NamePair;
constexpr Pair kTop[] = {{"embeddings.word_embeddings", "token_embd"},
                         {"embeddings.token_type_embeddings", "token_types"},
                         {"embeddings.LayerNorm", "token_embd_norm"}};
constexpr Pair kLayer[] = {{"attention.self.query", "attn_q"},
                           {"attention.self.key", "attn_k"},
                           {"attention.self.value", "attn_v"},
                           {"attention.output.dense", "attn_output"},
                           {"attention.output.LayerNorm", "attn_output_norm"},
                           {"mlp.gated_layers", "ffn_up"},  // gate rows first, as the builder's fused form
                           {"mlp.wo", "ffn_down"},
                           {"mlp.layernorm", "layer_output_norm"}};
// jina-bert-v2-code's modules, which have no mapping here yet (hf_jina_bert.h).
constexpr const char* kCodeForm[] = {"mlp.up_gated_layer", "mlp.down_layer", "attention.self.layer_norm_q",
                                     "attention.self.layer_norm_k", "layer_norm_1", "layer_norm_2"};

std::optional<TensorTarget> match(const HfModel& m, std::string_view rest) {
    if (auto name = detail::gguf_name_of(kTop, kLayer, "encoder.layer.", m.n_layers, rest)) return TensorTarget{*name};
    const auto split = detail::split_param(rest);
    const auto layer = split ? detail::split_layer(split->first, "encoder.layer.") : std::nullopt;
    if (!layer || layer->first >= m.n_layers) return std::nullopt;
    for (const char* code : kCodeForm)
        if (layer->second == code)
            fail("tensor '{}' is jina-bert-v2-code's form ({}), which pagoda does not read from a Hugging Face folder yet "
                 "(convert it to GGUF)", rest, code);
    return std::nullopt;
}

bool dropped(std::string_view rest) {
    return rest == "embeddings.position_ids" || rest.starts_with("pooler.") || rest.starts_with("cls.predictions.");
}

}  // namespace

bool is_jina_bert_class(std::string_view hf_arch) { return hf_arch == "JinaBertModel" || hf_arch == "JinaBertForMaskedLM"; }

HfModel read_hf_jina_bert_config(const nlohmann::json& root, const std::string& name, const std::string& hf_arch) {
    const Config c(root, name, "");
    HfModel m;
    m.hf_arch = hf_arch;
    m.arch = "jina-bert-v2";
    m.encoder = true;
    m.tied = true;  // no output head: the output is the hidden state (the masked-LM head is dropped)
    m.prefixes = {"", "bert."};

    const int64_t dim = detail::read_bert_shape(c, m, "jina-bert-v2");
    const std::string positions = c.string_or("position_embedding_type", "alibi");
    if (positions != "alibi")
        c.refuse("position_embedding_type", "is '" + positions + "', but pagoda's jina-bert-v2 builder has ALiBi only");
    const std::string ffn = c.string_or("feed_forward_type", "original");
    if (ffn != "geglu")
        c.refuse("feed_forward_type", "is '" + ffn + "', but pagoda's jina-bert-v2 builder computes geglu only");
    if (c.boolean_or("is_decoder", false)) c.refuse("is_decoder", "is true: pagoda reads JinaBert as a bidirectional encoder");
    const double eps = c.number_or("layer_norm_eps", 1e-12);
    if (!(eps > 0 && eps < 1)) c.refuse("layer_norm_eps", "must be in (0, 1)");

    auto& md = m.metadata;
    md.emplace_back("general.architecture", Value::string("jina-bert-v2"));
    md.emplace_back("general.name", Value::string(root.value("_name_or_path", std::string())));
    md.emplace_back("jina-bert-v2.context_length", Value::u32(uint32_t(c.positive("max_position_embeddings"))));
    md.emplace_back("jina-bert-v2.embedding_length", Value::u32(uint32_t(dim)));
    md.emplace_back("jina-bert-v2.feed_forward_length", Value::u32(uint32_t(c.positive("intermediate_size"))));
    md.emplace_back("jina-bert-v2.block_count", Value::u32(uint32_t(m.n_layers)));
    md.emplace_back("jina-bert-v2.attention.head_count", Value::u32(uint32_t(m.n_heads)));
    md.emplace_back("jina-bert-v2.attention.layer_norm_epsilon", Value::f32(float(eps)));
    md.emplace_back("jina-bert-v2.attention.causal", Value::boolean(false));
    md.emplace_back("tokenizer.ggml.token_type_count", Value::u32(uint32_t(c.positive_or("type_vocab_size", 2))));
    return m;
}

std::string hf_jina_bert_config_json(const gguf::File& f, const std::string& torch_dtype) {
    if (f.get_string("general.architecture") != "jina-bert-v2")
        fail("{}: architecture '{}' is not jina-bert-v2", f.name(), f.get_string("general.architecture"));
    if (f.get_bool_or("jina-bert-v2.attention.causal", false))
        fail("{}: jina-bert-v2.attention.causal is true; JinaBertModel is bidirectional", f.name());
    if (f.find_tensor("blk.0.ffn_gate.weight") || f.find_tensor("blk.0.attn_q_norm.weight"))
        fail("{}: this is jina-bert-v2-code's form (ffn_gate / attn_q_norm), which pagoda does not write as a Hugging Face "
             "folder yet", f.name());
    if (f.find_tensor("cls.weight") || f.find_tensor("cls.output.weight"))
        fail("{}: a jina-bert-v2 reranker (classifier head cls.*) has no Hugging Face form here yet", f.name());
    nlohmann::json j;
    j["architectures"] = {"JinaBertModel"};
    j["model_type"] = "bert";
    detail::write_bert_shape(f, "jina-bert-v2", 2, j);
    j["max_position_embeddings"] = f.get_int("jina-bert-v2.context_length");
    j["position_embedding_type"] = "alibi";
    j["feed_forward_type"] = "geglu";
    j["torch_dtype"] = torch_dtype;
    return j.dump(2) + "\n";
}

std::optional<TensorTarget> jina_bert_gguf_target(const HfModel& m, std::string_view name) {
    return detail::target_under_prefixes(m, name, [&](std::string_view rest) { return match(m, rest); }, dropped);
}

HfSource jina_bert_hf_source(const HfModel&, const std::string& name) {
    if (auto hf = detail::hf_name_of(kTop, kLayer, "encoder.layer.", name)) return {{*hf}};
    fail("tensor '{}' has no Hugging Face name for JinaBertModel", name);
}

}  // namespace pagoda::hf
