// config.json (and sentence-transformers' pooling files) of a BERT-family encoder -> GGUF `bert`
// metadata, as hf_encoder_config.h says.
#include "hf/hf_encoder_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "hf/config_reader.h"
#include "hf/hf_bert_shape.h"
#include "hf/hf_jina_bert.h"
#include "hf/hf_nomic_bert.h"

namespace pagoda::hf {
namespace {

using detail::Config;
using detail::Json;
using gguf::Value;

struct EncoderClass {
    const char* hf;
    bool roberta, classifier, nomic = false, jina = false;
};
constexpr EncoderClass kClasses[] = {
    {"BertModel", false, false},    {"BertForSequenceClassification", false, true},
    {"RobertaModel", true, false},  {"RobertaForSequenceClassification", true, true},
    {"XLMRobertaModel", true, false}, {"XLMRobertaForSequenceClassification", true, true},
    {"NomicBertModel", false, false, true},  // GGUF nomic-bert (hf_nomic_bert.h)
    {"JinaBertModel", false, false, false, true},  // GGUF jina-bert-v2 (hf_jina_bert.h)
    {"JinaBertForMaskedLM", false, false, false, true},
};

const EncoderClass* find_class(std::string_view hf_arch) {
    for (const EncoderClass& c : kClasses)
        if (hf_arch == c.hf) return &c;
    return nullptr;
}

Json parse_json(std::string_view text, const std::string& name) {
    Json j;
    try {
        j = Json::parse(text);
    } catch (const Json::exception& e) {
        fail("{}: not valid JSON ({})", name, e.what());
    }
    return j;
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read {}", path.string());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// id2label in index order; none for transformers' two placeholder labels (as the converter skips them).
std::vector<std::string> classifier_labels(const Config& c, const Json& root) {
    if (!c.has("id2label")) return {};
    const Config labels = c.object("id2label");
    std::vector<std::pair<int64_t, std::string>> items;
    for (const auto& [key, value] : root["id2label"].items()) {
        int64_t index = -1;
        try {
            size_t used = 0;
            index = std::stoll(key, &used);
            if (used != key.size()) index = -1;
        } catch (const std::exception&) {
        }
        if (index < 0) labels.refuse(key.c_str(), "is not a class index");
        if (!value.is_string()) labels.refuse(key.c_str(), "is not a label name");
        items.emplace_back(index, value.get<std::string>());
    }
    std::sort(items.begin(), items.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].first != int64_t(i)) c.refuse("id2label", "does not number its classes 0, 1, 2, ...");
        out.push_back(items[i].second);
    }
    if (out.size() == 2 && out[0] == "LABEL_0") return {};
    return out;
}

}  // namespace

bool is_encoder_class(std::string_view hf_arch) { return find_class(hf_arch) != nullptr; }

std::string encoder_class_list() {
    std::string s;
    for (const EncoderClass& c : kClasses) s += (s.empty() ? "" : ", ") + std::string(c.hf);
    return s;
}

HfModel read_hf_encoder_config(const Json& root, const std::string& name, const std::string& hf_arch) {
    const EncoderClass* cls = find_class(hf_arch);
    if (!cls) fail("{}: architectures[0] '{}' is not an encoder pagoda reads ({})", name, hf_arch, encoder_class_list());
    if (cls->nomic) return read_hf_nomic_config(root, name);
    if (cls->jina) return read_hf_jina_bert_config(root, name, hf_arch);
    const Config c(root, name, "");
    HfModel m;
    m.hf_arch = hf_arch;
    m.arch = "bert";
    m.encoder = true;
    m.roberta = cls->roberta;
    m.classifier = cls->classifier;
    m.tied = true;  // no output head: an encoder's output is its hidden state (or the classifier's)
    const std::string prefix = cls->roberta ? "roberta." : "bert.";
    // Saved *Model checkpoints name tensors without the prefix, *ForSequenceClassification with it.
    m.prefixes = cls->classifier ? std::vector<std::string>{prefix, ""} : std::vector<std::string>{"", prefix};

    const int64_t dim = detail::read_bert_shape(c, m, "bert");
    const std::string positions = c.string_or("position_embedding_type", "absolute");
    if (positions != "absolute")
        c.refuse("position_embedding_type", "is '" + positions + "', but pagoda's bert builder has absolute positions only");
    if (c.boolean_or("is_decoder", false)) c.refuse("is_decoder", "is true: pagoda reads this class as a bidirectional encoder");
    int64_t context = c.positive("max_position_embeddings");
    if (cls->roberta && c.has("pad_token_id")) {  // the converter's offset: positions start at padding_idx + 1
        const int64_t pad = c.integer("pad_token_id");
        if (pad < 0 || pad + 1 >= context) c.refuse("pad_token_id", "is out of range for max_position_embeddings");
        m.position_offset = pad + 1;
        context -= m.position_offset;
    }

    auto& md = m.metadata;
    md.emplace_back("general.architecture", Value::string("bert"));
    md.emplace_back("general.name", Value::string(root.value("_name_or_path", std::string())));
    md.emplace_back("bert.context_length", Value::u32(uint32_t(context)));
    md.emplace_back("bert.embedding_length", Value::u32(uint32_t(dim)));
    md.emplace_back("bert.feed_forward_length", Value::u32(uint32_t(c.positive("intermediate_size"))));
    md.emplace_back("bert.block_count", Value::u32(uint32_t(m.n_layers)));
    md.emplace_back("bert.attention.head_count", Value::u32(uint32_t(m.n_heads)));
    const double eps = c.number_or("layer_norm_eps", 1e-12);
    if (!(eps > 0 && eps < 1)) c.refuse("layer_norm_eps", "must be in (0, 1)");
    md.emplace_back("bert.attention.layer_norm_epsilon", Value::f32(float(eps)));
    md.emplace_back("bert.attention.causal", Value::boolean(false));
    md.emplace_back("tokenizer.ggml.token_type_count", Value::u32(uint32_t(c.positive_or("type_vocab_size", cls->roberta ? 1 : 2))));
    if (cls->classifier) {
        md.emplace_back("bert.pooling_type", Value::u32(4));  // rank: scored by the classification head
        const std::vector<std::string> labels = classifier_labels(c, root);
        if (!labels.empty()) md.emplace_back("bert.classifier.output_labels", Value::strings(labels));
    }
    return m;
}

std::optional<std::string> pooling_module_path(std::string_view modules_json, const std::string& name) {
    const Json j = parse_json(modules_json, name);
    if (!j.is_array()) fail("{}: not a list of modules", name);
    for (size_t i = 0; i < j.size(); ++i) {
        const Json& mod = j[i];
        if (!mod.is_object() || !mod.contains("type") || !mod["type"].is_string())
            fail("{}: module {} has no 'type' name", name, i);
        if (mod["type"].get<std::string>() != "sentence_transformers.models.Pooling") continue;
        if (!mod.contains("path") || !mod["path"].is_string()) fail("{}: module {} (Pooling) has no 'path'", name, i);
        const std::string path = mod["path"].get<std::string>();
        const std::filesystem::path p(path);
        if (path.empty() || p.is_absolute() || std::find(p.begin(), p.end(), "..") != p.end())
            fail("{}: module {} (Pooling) has path '{}', which is not a folder inside the model's", name, i, path);
        return path;
    }
    return std::nullopt;
}

int64_t pooling_type_of(std::string_view pooling_config_json, const std::string& name) {
    const Json j = parse_json(pooling_config_json, name);
    if (!j.is_object()) fail("{}: not a JSON object", name);
    const Config c(j, name, "");
    if (c.boolean_or("pooling_mode_mean_tokens", false)) return 1;
    if (c.boolean_or("pooling_mode_cls_token", false)) return 2;
    if (c.boolean_or("pooling_mode_lasttoken", false)) return 3;
    for (const char* other : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
        if (c.boolean_or(other, false)) c.refuse(other, "is true, but pagoda pools by mean, cls or last token only");
    fail("{}: no pooling mode is true (pooling_mode_mean_tokens, pooling_mode_cls_token or pooling_mode_lasttoken)", name);
}

void add_sentence_transformers_pooling(HfModel& m, const std::string& dir) {
    namespace fs = std::filesystem;
    if (!m.encoder || m.classifier) return;
    const fs::path modules = fs::path(dir) / "modules.json";
    if (!fs::exists(modules)) return;
    const std::optional<std::string> path = pooling_module_path(read_text(modules), modules.string());
    if (!path) return;
    const fs::path config = fs::path(dir) / *path / "config.json";
    if (!fs::exists(config)) fail("{}: the Pooling module's {} is missing", modules.string(), config.string());
    m.metadata.emplace_back(m.arch + ".pooling_type", Value::u32(uint32_t(pooling_type_of(read_text(config), config.string()))));
}

}  // namespace pagoda::hf
