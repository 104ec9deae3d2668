// BERT / RoBERTa / XLM-R tensor names <-> llama.cpp's GGUF `bert` names (hf_tensor_names.h's encoder
// half). Names are read after the "bert." / "roberta." prefix (or none); TF-era ".gamma" / ".beta"
// mean ".weight" / ".bias". Not loaded, as the converter drops them: embeddings.position_ids,
// an embedding model's pooler, BERT's pre-training heads (cls.predictions, cls.seq_relationship).
#include <charconv>
#include <fmt/format.h>
#include <span>

#include "core/error.h"
#include "hf/hf_jina_bert.h"
#include "hf/hf_nomic_bert.h"
#include "hf/hf_tensor_names.h"

namespace pagoda::hf {
namespace {

struct Pair {
    const char* hf;
    const char* gguf;
};

// Each with a ".weight" and (where it has one) a ".bias".
constexpr Pair kEmbeddings[] = {{"embeddings.word_embeddings", "token_embd"},
                                {"embeddings.position_embeddings", "position_embd"},
                                {"embeddings.token_type_embeddings", "token_types"},
                                {"embeddings.LayerNorm", "token_embd_norm"}};
constexpr Pair kLayer[] = {{"attention.self.query", "attn_q"},           {"attention.self.key", "attn_k"},
                           {"attention.self.value", "attn_v"},           {"attention.output.dense", "attn_output"},
                           {"attention.output.LayerNorm", "attn_output_norm"}, {"intermediate.dense", "ffn_up"},
                           {"output.dense", "ffn_down"},                 {"output.LayerNorm", "layer_output_norm"}};
// The classification heads (top level, no prefix), and BERT's pooler (under the prefix).
constexpr Pair kBertHead[] = {{"classifier", "cls.output"}};
constexpr Pair kRobertaHead[] = {{"classifier.dense", "cls"}, {"classifier.out_proj", "cls.output"}};
constexpr Pair kBertPooler = {"pooler.dense", "cls"};

// "x.weight" -> ("x", "weight"); nullopt for another suffix.
std::optional<std::pair<std::string, std::string>> split_param(std::string_view name) {
    for (const auto& [hf, gguf] : {std::pair{".weight", "weight"}, {".bias", "bias"}, {".gamma", "weight"}, {".beta", "bias"}})
        if (name.ends_with(hf)) return std::pair{std::string(name.substr(0, name.size() - std::string_view(hf).size())), std::string(gguf)};
    return std::nullopt;
}

std::optional<TensorTarget> match(const HfModel& m, std::string_view rest, bool top_level) {
    const auto split = split_param(rest);
    if (!split) return std::nullopt;
    const auto& [base, param] = *split;
    if (base == "pooler.dense") {
        if (m.classifier && !m.roberta) return TensorTarget{fmt::format("{}.{}", kBertPooler.gguf, param)};
        return std::nullopt;  // an embedding model's pooler: unused by its pooling, as the converter drops it
    }
    if (top_level && m.classifier)
        for (const Pair& p : m.roberta ? std::span<const Pair>(kRobertaHead) : std::span<const Pair>(kBertHead))
            if (base == p.hf) return TensorTarget{fmt::format("{}.{}", p.gguf, param)};
    for (const Pair& p : kEmbeddings)
        if (base == p.hf) {
            TensorTarget t{fmt::format("{}.{}", p.gguf, param)};
            if (std::string_view(p.gguf) == "position_embd") t.skip_rows = m.position_offset;
            return t;
        }
    constexpr std::string_view layers = "encoder.layer.";
    if (!std::string_view(base).starts_with(layers)) return std::nullopt;
    const std::string_view after = std::string_view(base).substr(layers.size());
    int64_t layer = -1;
    const auto [end, ec] = std::from_chars(after.data(), after.data() + after.size(), layer);
    const size_t digits = size_t(end - after.data());
    if (ec != std::errc() || layer < 0 || layer >= m.n_layers || digits >= after.size() || after[digits] != '.' ||
        (digits > 1 && after[0] == '0'))
        return std::nullopt;
    const std::string_view tail = after.substr(digits + 1);
    for (const Pair& p : kLayer)
        if (tail == p.hf) return TensorTarget{fmt::format("blk.{}.{}.{}", layer, p.gguf, param)};
    return std::nullopt;
}

bool dropped(const HfModel& m, std::string_view rest) {
    return rest == "embeddings.position_ids" || rest.starts_with("cls.predictions.") || rest.starts_with("cls.seq_relationship.") ||
           (rest.starts_with("pooler.") && !(m.classifier && !m.roberta));
}

}  // namespace

std::optional<TensorTarget> encoder_gguf_target(const HfModel& m, std::string_view name) {
    if (m.arch == "nomic-bert") return nomic_gguf_target(m, name);
    if (m.arch == "jina-bert-v2") return jina_bert_gguf_target(m, name);
    for (const std::string& prefix : m.prefixes) {
        if (!name.starts_with(prefix)) continue;
        const std::string_view rest = name.substr(prefix.size());
        if (auto t = match(m, rest, prefix.empty())) return t;
        if (dropped(m, rest)) return std::nullopt;
    }
    fail("tensor '{}' is not a tensor pagoda knows for {}", name, m.hf_arch);
}

HfSource encoder_hf_source(const HfModel& m, const std::string& name) {
    if (m.arch == "nomic-bert") return nomic_hf_source(m, name);
    if (m.arch == "jina-bert-v2") return jina_bert_hf_source(m, name);
    const std::string& prefix = m.prefixes.front().empty() ? m.prefixes.back() : m.prefixes.front();
    const std::string under = m.classifier ? prefix : "";  // *Model checkpoints carry no prefix
    const auto split = split_param(name);
    if (split && (name.ends_with(".weight") || name.ends_with(".bias"))) {
        const auto& [base, param] = *split;
        for (const Pair& p : kEmbeddings)
            if (base == p.gguf) {
                HfSource s{{fmt::format("{}{}.{}", under, p.hf, param)}};
                if (std::string_view(p.gguf) == "position_embd") s.pad_rows = m.position_offset;
                return s;
            }
        if (m.classifier) {
            for (const Pair& p : m.roberta ? std::span<const Pair>(kRobertaHead) : std::span<const Pair>(kBertHead))
                if (base == p.gguf) return {{fmt::format("{}.{}", p.hf, param)}};
            if (!m.roberta && base == kBertPooler.gguf) return {{fmt::format("{}{}.{}", under, kBertPooler.hf, param)}};
        }
        int64_t layer = -1;
        if (base.starts_with("blk.")) {
            const std::string_view after = std::string_view(base).substr(4);
            const auto [end, ec] = std::from_chars(after.data(), after.data() + after.size(), layer);
            const size_t digits = size_t(end - after.data());
            if (ec == std::errc() && digits < after.size() && after[digits] == '.')
                for (const Pair& p : kLayer)
                    if (after.substr(digits + 1) == p.gguf)
                        return {{fmt::format("{}encoder.layer.{}.{}.{}", under, layer, p.hf, param)}};
        }
    }
    fail("tensor '{}' has no Hugging Face name for {}", name, m.hf_arch);
}

}  // namespace pagoda::hf
