// Writing WordPiece and Unigram tokenizer.json parts (contract in hf_tokenizer_write_encoder.h).
#include "tokenizer/hf_tokenizer_write_encoder.h"

#include "tokenizer/hf_tokenizer_json.h"

namespace pagoda::tokenizer::hf {

namespace {

using OJson = nlohmann::ordered_json;
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

bool is_special(TokenType t) { return t == TokenType::control || t == TokenType::unknown; }

std::string hf_continuing_prefix(const Vocab& v) { return v.word_prefix().empty() ? v.continuing_prefix() : "##"; }

std::string prepend_scheme(const Vocab& v) {
    if (!v.prepend_scheme().empty()) return v.prepend_scheme();
    return v.add_space_prefix() ? "always" : "never";
}

}  // namespace

std::vector<std::string> hf_token_texts(const Vocab& v) {
    std::vector<std::string> out;
    out.reserve(size_t(v.n_tokens()));
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
        const std::string& text = v.text(id);
        if (v.type() != VocabType::wpm || v.word_prefix().empty() || is_special(v.token_type(id))) {
            out.push_back(text);
        } else if (text.starts_with(v.word_prefix())) {
            out.push_back(text.substr(v.word_prefix().size()));
        } else {
            const std::string& cont = v.continuing_prefix();
            out.push_back("##" + (text.starts_with(cont) ? text.substr(cont.size()) : text));
        }
    }
    return out;
}

OJson encoder_model_json(const Vocab& v, const std::vector<std::string>& texts, OJson vocab_object) {
    const OJson unk = v.unk() == kNoToken ? OJson(nullptr) : OJson(texts[size_t(v.unk())]);
    if (v.type() == VocabType::wpm)
        return {{"type", "WordPiece"},
                {"unk_token", unk},
                {"continuing_subword_prefix", hf_continuing_prefix(v)},
                {"max_input_chars_per_word", v.max_input_chars_per_word()},
                {"vocab", std::move(vocab_object)}};
    OJson pieces = OJson::array();
    for (int32_t id = 0; id < v.n_tokens(); ++id) pieces.push_back(OJson::array({texts[size_t(id)], double(v.score(id))}));
    return {{"type", "Unigram"},
            {"unk_id", v.unk() == kNoToken ? OJson(nullptr) : OJson(v.unk())},
            {"vocab", std::move(pieces)},
            {"byte_fallback", v.byte_fallback()}};
}

OJson encoder_normalizer_json(const Vocab& v) {
    if (v.type() == VocabType::wpm) {
        const BertOptions& b = v.bert_options();
        return {{"type", "BertNormalizer"},
                {"clean_text", b.clean_text},
                {"handle_chinese_chars", b.handle_chinese_chars},
                {"strip_accents", b.strip_accents},
                {"lowercase", b.lowercase}};
    }
    OJson steps = OJson::array();
    if (!v.precompiled_charsmap().empty())
        steps.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", encode_base64(v.precompiled_charsmap())}});
    if (v.collapse_spaces())
        steps.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
    if (steps.empty()) return nullptr;
    return {{"type", "Sequence"}, {"normalizers", steps}};
}

OJson encoder_pre_tokenizer_json(const Vocab& v) {
    if (v.type() == VocabType::wpm) return {{"type", "BertPreTokenizer"}};
    OJson metaspace = {{"type", "Metaspace"},
                       {"replacement", kSpace},
                       {"prepend_scheme", prepend_scheme(v)},
                       {"split", v.split_words() || v.remove_extra_whitespaces()}};
    if (!v.remove_extra_whitespaces()) return metaspace;
    return {{"type", "Sequence"}, {"pretokenizers", OJson::array({{{"type", "WhitespaceSplit"}}, metaspace})}};
}

OJson encoder_post_processor_json(const Vocab& v, const std::vector<std::string>& texts) {
    OJson single = OJson::array(), pair = OJson::array(), specials = OJson::object();
    auto special = [&](int32_t id, int type_id) {
        const std::string& name = texts[size_t(id)];
        specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
        return OJson{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
    };
    auto sequence = [](int seq, int type_id) { return OJson{{"Sequence", {{"id", seq == 0 ? "A" : "B"}, {"type_id", type_id}}}}; };
    if (v.add_bos()) single.push_back(special(v.bos(), 0));
    single.push_back(sequence(0, 0));
    if (v.add_eos()) single.push_back(special(v.eos(), 0));
    if (v.add_sep()) single.push_back(special(v.sep(), 0));
    for (const TemplatePiece& p : v.pair_template())
        pair.push_back(p.token == kNoToken ? sequence(p.sequence, p.type_id) : special(p.token, p.type_id));
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

OJson encoder_decoder_json(const Vocab& v) {
    // pagoda's decode() keeps every space between words: no cleanup.
    if (v.type() == VocabType::wpm) return {{"type", "WordPiece"}, {"prefix", hf_continuing_prefix(v)}, {"cleanup", false}};
    return {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", prepend_scheme(v)}, {"split", true}};
}

}  // namespace pagoda::tokenizer::hf
