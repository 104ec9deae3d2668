// Writing a VocabSpec as tokenizer.json + tokenizer_config.json (contract in hf_tokenizer.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/hf_tokenizer_pipeline.h"
#include "tokenizer/hf_tokenizer_write_encoder.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

using OJson = nlohmann::ordered_json;

bool is_added(TokenType t) {
    return t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined || t == TokenType::unused;
}

// SentencePiece scores as BPE merges, the way transformers' converter derives them: every split of
// a piece into two pieces (at character boundaries), ordered by the split pieces' ids within a piece,
// then by the piece's score, highest first (a stable sort, so equal scores keep id order).
OJson merges_from_scores(const Vocab& v) {
    struct Merge {
        int32_t left, right;
        float score;
    };
    std::vector<Merge> merges;
    std::vector<size_t> cuts;
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
        const std::string& text = v.text(id);
        cuts.clear();
        for (size_t pos = utf8_sequence_length(text, 0); pos < text.size(); pos += utf8_sequence_length(text, pos))
            cuts.push_back(pos);
        const size_t first = merges.size();
        for (size_t cut : cuts) {
            int32_t l = v.find(std::string_view(text).substr(0, cut)), r = v.find(std::string_view(text).substr(cut));
            if (l != kNoToken && r != kNoToken) merges.push_back({l, r, v.score(id)});
        }
        std::sort(merges.begin() + first, merges.end(),
                  [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    }
    std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
    OJson out = OJson::array();
    for (const Merge& m : merges) out.push_back(OJson::array({v.text(m.left), v.text(m.right)}));
    return out;
}

OJson merges_from_ranks(const VocabSpec& spec) {
    OJson out = OJson::array();
    for (const std::string& m : spec.merges) {
        const size_t sep = m.find(' ', 1);  // the same split Vocab makes
        out.push_back(OJson::array({m.substr(0, sep), m.substr(sep + 1)}));
    }
    return out;
}

OJson token_or_null(const Vocab& v, int32_t id) { return id == kNoToken ? OJson(nullptr) : OJson(v.text(id)); }

}  // namespace

HfTokenizerFiles render_hf_tokenizer(const VocabSpec& spec, const std::string& chat_template) {
    const Vocab v = Vocab::from_spec(spec);
    // Its Metaspace-plus-newline-split pipeline is not written yet: refused rather than mis-described.
    if (v.spm_style_bpe()) fail("the '{}' tokenizer model has no tokenizer.json form here", spec.model);
    const bool spm = v.type() == VocabType::spm;
    const bool encoder = v.type() == VocabType::wpm || v.type() == VocabType::ugm;
    const std::vector<std::string> texts = hf::hf_token_texts(v);  // v's texts, WordPiece in Hugging Face's spelling
    for (int32_t id = 0; id < v.n_tokens(); ++id)
        if (!utf8_valid(v.text(id)))
            fail("token {} is not valid UTF-8, which tokenizer.json (a JSON file) cannot hold", id);
    if (!utf8_valid(chat_template)) fail("the chat template is not valid UTF-8");

    // The vocab maps each text to one id, in id order. An added token whose text is already there
    // stays in added_tokens alone (tokenizers matches those first, as pagoda's literal tokens are);
    // two ordinary tokens with one text keep the later id, the one pagoda's encoder gives.
    std::unordered_map<std::string_view, size_t> slot_of;  // text -> index in `entries`
    std::vector<std::pair<std::string_view, int32_t>> entries;
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
        auto [it, fresh] = slot_of.emplace(texts[size_t(id)], entries.size());
        if (fresh)
            entries.emplace_back(texts[size_t(id)], id);
        else if (!is_added(v.token_type(id)))
            entries[it->second].second = id;
    }
    // ordered_json's object looks keys up linearly; the texts are unique already, so append to its
    // underlying vector directly (a 256k vocabulary would otherwise take minutes).
    OJson vocab = OJson::object();
    auto& items = static_cast<std::vector<std::pair<const std::string, OJson>>&>(vocab.get_ref<OJson::object_t&>());
    items.reserve(entries.size());
    for (const auto& [text, id] : entries) items.emplace_back(std::string(text), id);

    OJson added = OJson::array(), added_decoder = OJson::object();
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
        const TokenType t = v.token_type(id);
        if (!is_added(t)) continue;
        OJson entry = {{"id", id},           {"content", texts[size_t(id)]}, {"single_word", false},
                       {"lstrip", v.lstrip(id)}, {"rstrip", v.rstrip(id)}, {"normalized", false},
                       {"special", t != TokenType::user_defined}};
        added.push_back(entry);
        entry.erase("id");
        added_decoder[std::to_string(id)] = entry;
    }

    OJson model = encoder ? hf::encoder_model_json(v, texts, std::move(vocab)) : OJson{{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", spm ? token_or_null(v, v.unk()) : OJson(nullptr)},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", spm},
                   {"byte_fallback", spm},
                   {"ignore_merges", v.ignore_merges()},
                   {"vocab", std::move(vocab)},
                   {"merges", spm ? merges_from_scores(v) : merges_from_ranks(spec)}};
    OJson tokenizer = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"added_tokens", std::move(added)},
                       {"normalizer", encoder ? hf::encoder_normalizer_json(v) : hf::normalizer_json(v)},
                       {"pre_tokenizer", encoder ? hf::encoder_pre_tokenizer_json(v) : hf::pre_tokenizer_json(v)},
                       {"post_processor", encoder ? hf::encoder_post_processor_json(v, texts) : hf::post_processor_json(v)},
                       {"decoder", encoder ? hf::encoder_decoder_json(v) : hf::decoder_json(v)},
                       {"model", std::move(model)}};

    OJson config = {{"add_bos_token", v.add_bos()},
                    {"add_eos_token", v.add_eos()},
                    {"added_tokens_decoder", std::move(added_decoder)},
                    {"bos_token", token_or_null(v, v.bos())}};
    if (!chat_template.empty()) config["chat_template"] = chat_template;
    config["clean_up_tokenization_spaces"] = false;
    config["eos_token"] = token_or_null(v, v.eos());
    config["pad_token"] = token_or_null(v, v.pad());
    if (v.sep() != kNoToken) config["sep_token"] = texts[size_t(v.sep())];
    if (v.cls() != kNoToken) config["cls_token"] = texts[size_t(v.cls())];
    if (v.mask() != kNoToken) config["mask_token"] = texts[size_t(v.mask())];
    config["tokenizer_class"] = spm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast";
    config["unk_token"] = token_or_null(v, v.unk());
    return {tokenizer.dump(2) + "\n", config.dump(2) + "\n"};
}

void write_hf_tokenizer(const std::string& dir, const VocabSpec& spec, const std::string& chat_template) {
    const HfTokenizerFiles files = render_hf_tokenizer(spec, chat_template);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("{}: cannot create the folder: {}", dir, ec.message());
    for (const auto& [name, text] : {std::pair{"tokenizer.json", &files.tokenizer_json},
                                     std::pair{"tokenizer_config.json", &files.tokenizer_config_json}}) {
        const std::string path = (std::filesystem::path(dir) / name).string();
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(text->data(), std::streamsize(text->size()));
        out.close();
        if (!out) fail("{}: cannot write the file", path);
    }
}

}  // namespace pagoda::tokenizer
