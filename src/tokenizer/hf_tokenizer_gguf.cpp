// A VocabSpec as GGUF tokenizer keys, so a Hugging Face folder can be presented as a GGUF view
// (contract in hf_tokenizer.h).
#include "tokenizer/hf_tokenizer.h"

#include <unordered_set>

namespace pagoda::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// A WordPiece vocabulary in llama.cpp's spelling (its converter's "phantom space" form: "##x" -> "x",
// "x" -> U+2581 "x", special tokens unchanged), so llama.cpp reads the file; nullopt when the spec is
// in that form already or when the rewrite would give two tokens one text (then pagoda's keys keep
// the spec's own prefixes).
std::optional<std::vector<std::string>> llama_cpp_wordpiece_tokens(const VocabSpec& spec) {
    const std::string word = spec.word_prefix.value_or(std::string(kSpace));
    const std::string cont = spec.continuing_prefix.value_or("");
    if (word == kSpace && cont.empty()) return std::nullopt;
    if (!word.empty() || cont.empty()) return std::nullopt;  // only Hugging Face's "" / "##" form is rewritten
    std::vector<std::string> out = spec.tokens;
    std::unordered_set<std::string> seen;
    for (size_t i = 0; i < out.size(); ++i) {
        const int64_t type = spec.token_types.empty() ? int64_t(TokenType::normal) : spec.token_types[i];
        if (type != int64_t(TokenType::control) && type != int64_t(TokenType::unknown)) {
            if (out[i].starts_with(cont))
                out[i] = out[i].substr(cont.size());
            else
                out[i] = std::string(kSpace) + out[i];
        }
        if (!seen.insert(out[i]).second) return std::nullopt;
    }
    return out;
}

// WordPiece and Unigram settings: llama.cpp's keys, then pagoda's for what they cannot say.
template <class Add>
void add_encoder_keys(const VocabSpec& spec, bool rewritten, Add& add) {
    if (!spec.precompiled_charsmap.empty()) {
        std::vector<gguf::Value> bytes;
        bytes.reserve(spec.precompiled_charsmap.size());
        for (char c : spec.precompiled_charsmap) bytes.push_back(gguf::Value::u8(static_cast<uint8_t>(c)));
        add("tokenizer.ggml.precompiled_charsmap", gguf::Value::array(gguf::ValueType::u8, std::move(bytes)));
    }
    if (!rewritten) {
        if (spec.word_prefix) add("tokenizer.pagoda.wordpiece.word_prefix", gguf::Value::string(*spec.word_prefix));
        if (spec.continuing_prefix)
            add("tokenizer.pagoda.wordpiece.continuing_prefix", gguf::Value::string(*spec.continuing_prefix));
    }
    if (spec.max_input_chars_per_word)
        add("tokenizer.pagoda.wordpiece.max_input_chars_per_word", gguf::Value::u32(uint32_t(*spec.max_input_chars_per_word)));
    if (spec.clean_text) add("tokenizer.pagoda.wordpiece.clean_text", gguf::Value::boolean(*spec.clean_text));
    if (spec.handle_chinese_chars)
        add("tokenizer.pagoda.wordpiece.handle_chinese_chars", gguf::Value::boolean(*spec.handle_chinese_chars));
    if (spec.collapse_spaces) add("tokenizer.pagoda.unigram.collapse_spaces", gguf::Value::boolean(true));
    if (!spec.prepend_scheme.empty()) add("tokenizer.pagoda.unigram.prepend_scheme", gguf::Value::string(spec.prepend_scheme));
    if (spec.split_words) add("tokenizer.pagoda.unigram.split_words", gguf::Value::boolean(true));
    if (spec.byte_fallback) add("tokenizer.pagoda.unigram.byte_fallback", gguf::Value::boolean(true));
    if (spec.charsmap_graphemes) add("tokenizer.pagoda.unigram.charsmap_graphemes", gguf::Value::boolean(true));
    if (!spec.pair_template.empty()) {
        std::vector<std::string> items;
        for (const TemplatePiece& p : spec.pair_template) items.push_back(template_piece_text(p));
        add("tokenizer.pagoda.pair_template", gguf::Value::strings(items));
    }
}

}  // namespace

std::vector<std::pair<std::string, gguf::Value>> vocab_spec_gguf_keys(const VocabSpec& spec,
                                                                      const std::string& chat_template) {
    (void)Vocab::from_spec(spec);  // refuse what Vocab::from_gguf would refuse, before anyone writes it
    std::vector<std::pair<std::string, gguf::Value>> keys;
    auto add = [&](std::string key, gguf::Value value) { keys.emplace_back(std::move(key), std::move(value)); };
    auto i32s = [](const std::vector<int64_t>& v) {
        return gguf::Value::i32s(std::vector<int32_t>(v.begin(), v.end()));  // from_spec checked the ranges
    };
    add("tokenizer.ggml.model", gguf::Value::string(spec.model));
    if (!spec.pre.empty()) add("tokenizer.ggml.pre", gguf::Value::string(spec.pre));
    const auto phantom = spec.model == "bert" ? llama_cpp_wordpiece_tokens(spec) : std::nullopt;
    add("tokenizer.ggml.tokens", gguf::Value::strings(phantom ? *phantom : spec.tokens));
    if (!spec.scores.empty()) add("tokenizer.ggml.scores", gguf::Value::f32s(spec.scores));
    if (!spec.token_types.empty()) add("tokenizer.ggml.token_type", i32s(spec.token_types));
    if (!spec.merges.empty() || spec.model == "gpt2")  // from_gguf requires the key for BPE, even empty
        add("tokenizer.ggml.merges", gguf::Value::strings(spec.merges));
    for (const auto& [key, id] : {std::pair{"bos_token_id", spec.bos}, std::pair{"eos_token_id", spec.eos},
                                  std::pair{"unknown_token_id", spec.unk}, std::pair{"padding_token_id", spec.pad},
                                  std::pair{"seperator_token_id", spec.sep}, std::pair{"eot_token_id", spec.eot},
                                  std::pair{"eom_token_id", spec.eom}, std::pair{"fim_pre_token_id", spec.fim_pre},
                                  std::pair{"fim_suf_token_id", spec.fim_suf}, std::pair{"fim_mid_token_id", spec.fim_mid},
                                  std::pair{"fim_pad_token_id", spec.fim_pad}, std::pair{"fim_rep_token_id", spec.fim_rep},
                                  std::pair{"fim_sep_token_id", spec.fim_sep}, std::pair{"cls_token_id", spec.cls},
                                  std::pair{"mask_token_id", spec.mask}})
        if (id) add(std::string("tokenizer.ggml.") + key, gguf::Value::u32(uint32_t(*id)));
    for (const auto& [key, flag] : {std::pair{"add_bos_token", spec.add_bos}, std::pair{"add_eos_token", spec.add_eos},
                                    std::pair{"add_space_prefix", spec.add_space_prefix}, std::pair{"add_sep_token", spec.add_sep},
                                    std::pair{"normalizer.lowercase", spec.lowercase},
                                    std::pair{"normalizer.strip_accents", spec.strip_accents},
                                    std::pair{"remove_extra_whitespaces", spec.remove_extra_whitespaces}})
        if (flag) add(std::string("tokenizer.ggml.") + key, gguf::Value::boolean(*flag));
    if (!chat_template.empty()) add("tokenizer.chat_template", gguf::Value::string(chat_template));
    // What llama.cpp's keys cannot say (Vocab::from_gguf reads these back).
    if (!spec.pre_patterns.empty()) add("tokenizer.pagoda.pre_patterns", gguf::Value::strings(spec.pre_patterns));
    if (spec.ignore_merges) add("tokenizer.pagoda.ignore_merges", gguf::Value::boolean(*spec.ignore_merges));
    if (!spec.lstrip_ids.empty()) add("tokenizer.pagoda.lstrip_ids", i32s(spec.lstrip_ids));
    if (!spec.rstrip_ids.empty()) add("tokenizer.pagoda.rstrip_ids", i32s(spec.rstrip_ids));
    add_encoder_keys(spec, phantom.has_value(), add);
    return keys;
}

}  // namespace pagoda::tokenizer
