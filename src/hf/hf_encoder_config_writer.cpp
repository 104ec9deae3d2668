// hf_encoder_config_json / sentence_transformers_files: the config.json (and sentence-transformers'
// pooling files) a GGUF `bert` model stands for — the inverse of hf_encoder_config.cpp, so a folder
// written from a GGUF loads back to the same metadata and tensors.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "hf/hf_bert_shape.h"
#include "hf/hf_encoder_config.h"
#include "hf/hf_jina_bert.h"
#include "hf/hf_nomic_bert.h"

namespace pagoda::hf {

using Json = nlohmann::json;

std::string encoder_class_for(const gguf::File& f, const std::string& hf_class) {
    if (f.get_string_or("general.architecture", "") == "nomic-bert") {
        if (!hf_class.empty() && hf_class != "NomicBertModel")
            fail("{}: a nomic-bert model is written as NomicBertModel, not {}", f.name(), hf_class);
        return "NomicBertModel";
    }
    if (f.get_string_or("general.architecture", "") == "jina-bert-v2") {
        if (!hf_class.empty() && hf_class != "JinaBertModel")
            fail("{}: a jina-bert-v2 model is written as JinaBertModel, not {}", f.name(), hf_class);
        return "JinaBertModel";
    }
    const bool rank = f.get_int_or("bert.pooling_type", 0) == 4;
    std::string cls = hf_class;
    if (cls.empty()) {
        cls = f.get_string_or("tokenizer.ggml.model", "") == "t5" ? "XLMRoberta" : "Bert";
        cls += rank ? "ForSequenceClassification" : "Model";
    }
    if (!is_encoder_class(cls)) fail("'{}' is not an encoder class pagoda writes ({})", cls, encoder_class_list());
    if (rank != cls.ends_with("ForSequenceClassification"))
        fail("{}: {} is {} classifier, but the model's bert.pooling_type is {}", f.name(), cls,
             rank ? "not a" : "a", f.get_int_or("bert.pooling_type", 0));
    return cls;
}

std::string hf_encoder_config_json(const gguf::File& f, const std::string& torch_dtype, const std::string& hf_class) {
    if (f.get_string("general.architecture") == "nomic-bert") {
        encoder_class_for(f, hf_class);  // checks the class asked for
        return hf_nomic_config_json(f, torch_dtype);
    }
    if (f.get_string("general.architecture") == "jina-bert-v2") {
        encoder_class_for(f, hf_class);  // checks the class asked for
        return hf_jina_bert_config_json(f, torch_dtype);
    }
    if (f.get_string("general.architecture") != "bert")
        fail("{}: architecture '{}' has no Hugging Face encoder form here (bert, nomic-bert, jina-bert-v2)", f.name(),
             f.get_string("general.architecture"));
    const std::string cls = encoder_class_for(f, hf_class);
    const bool roberta = cls.find("Roberta") != std::string::npos, classifier = cls.ends_with("ForSequenceClassification");
    if (f.get_bool_or("bert.attention.causal", false)) fail("{}: bert.attention.causal is true; an HF encoder is bidirectional", f.name());
    const gguf::TensorInfo* positions = f.find_tensor("position_embd.weight");
    if (!positions || positions->shape.size() != 2) fail("{}: tensor position_embd.weight is missing or not 2-D", f.name());
    Json j;
    j["architectures"] = {cls};
    j["model_type"] = cls.starts_with("XLMRoberta") ? "xlm-roberta" : roberta ? "roberta" : "bert";
    detail::write_bert_shape(f, "bert", 1, j);
    j["position_embedding_type"] = "absolute";
    // RoBERTa numbers positions from padding_idx + 1; the GGUF's table starts at that row.
    const int64_t pad = f.get_int_or("tokenizer.ggml.padding_token_id", roberta ? 1 : 0);
    const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
    if (roberta && (pad < 0 || !embd || embd->shape.size() != 2 || pad >= embd->shape[1]))
        fail("{}: tokenizer.ggml.padding_token_id {} is not a token, and {} numbers positions from it", f.name(), pad, cls);
    j["pad_token_id"] = pad;
    j["max_position_embeddings"] = positions->shape[1] + (roberta ? pad + 1 : 0);
    j["torch_dtype"] = torch_dtype;
    if (classifier) {
        if (!f.find_tensor("cls.weight") || !f.find_tensor("cls.output.weight"))
            fail("{}: {} has a dense layer then an output layer (cls.weight and cls.output.weight); the model lacks one "
                 "(gen-model: --rank-head dense)", f.name(), cls);
        const gguf::TensorInfo* out = f.find_tensor("cls.output.weight");
        const int64_t classes = out->shape.size() == 2 ? out->shape[1] : 1;
        std::vector<std::string> labels;
        if (f.has("bert.classifier.output_labels")) labels = f.get_strings("bert.classifier.output_labels");
        if (labels.empty())  // transformers' default names (two of them read back as no labels, as written)
            for (int64_t i = 0; i < classes; ++i) labels.push_back("LABEL_" + std::to_string(i));
        Json id2label = Json::object(), label2id = Json::object();
        for (size_t i = 0; i < labels.size(); ++i) {
            id2label[std::to_string(i)] = labels[i];
            label2id[labels[i]] = i;
        }
        j["id2label"] = id2label;
        j["label2id"] = label2id;
        if (roberta) j["classifier_dropout"] = nullptr;
    }
    return j.dump(2) + "\n";
}

std::vector<std::pair<std::string, std::string>> sentence_transformers_files(const gguf::File& f) {
    const std::string arch = f.get_string("general.architecture");
    const int64_t type = f.get_int_or(arch + ".pooling_type", 0);
    if (type < 1 || type > 3) return {};
    const Json modules = Json::array({{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
                                      {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
    const Json pooling = {{"word_embedding_dimension", f.get_int(arch + ".embedding_length")},
                          {"pooling_mode_cls_token", type == 2},
                          {"pooling_mode_mean_tokens", type == 1},
                          {"pooling_mode_max_tokens", false},
                          {"pooling_mode_mean_sqrt_len_tokens", false},
                          {"pooling_mode_weightedmean_tokens", false},
                          {"pooling_mode_lasttoken", type == 3},
                          {"include_prompt", true}};
    return {{"modules.json", modules.dump(2) + "\n"}, {"1_Pooling/config.json", pooling.dump(2) + "\n"}};
}

}  // namespace pagoda::hf
