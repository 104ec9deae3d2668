#include "tokenizer/vocab.h"

#include <algorithm>
#include <tuple>
#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace pagoda::tokenizer {

namespace {

// Token texts llama.cpp recognises as "end of turn" when the file names no EOT id.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<turn|>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>",
};
// Token texts that end generation whenever they are in the vocabulary (llama.cpp's list).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<turn|>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
};

// Fill-in-the-middle token texts llama.cpp's loader recognises when the file names no id, in the
// order tried (the first one in the vocabulary wins).
constexpr std::string_view kFimPrefixTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>"};
constexpr std::string_view kFimSuffixTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>"};
constexpr std::string_view kFimMiddleTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
constexpr std::string_view kFimRepoTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// GGUF writers store "no such token" as -1, often as the u32 0xFFFFFFFF; llama.cpp reads that as
// "none" (not as "the default"), and so does VocabSpec.
std::optional<int64_t> optional_id(const gguf::File& file, std::string_view key) {
    const gguf::Value* v = file.find(key);
    if (!v) return std::nullopt;
    auto id = v->as_int();
    if (!v->is_integer() || !id) fail("{}: {} must be an integer token id", file.name(), key);
    if (*id == -1 || *id == 0xFFFFFFFFll) return -1;
    return *id;
}

std::optional<bool> optional_bool(const gguf::File& file, std::string_view key) {
    if (!file.has(key)) return std::nullopt;
    return file.get_bool(key);
}

std::string byte_token_text(uint8_t b) { return fmt::format("<0x{:02X}>", b); }

bool contains_any(const std::string& haystack, std::initializer_list<std::string_view> needles) {
    std::string lower = haystack;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (auto n : needles)
        if (lower.find(n) != std::string::npos) return true;
    return false;
}

// pagoda's own keys for the WordPiece / Unigram settings llama.cpp's GGUF has no key for.
void read_encoder_pagoda_keys(const gguf::File& file, VocabSpec& spec) {
    auto optional_string = [&](const char* key) -> std::optional<std::string> {
        if (!file.has(key)) return std::nullopt;
        return file.get_string(key);
    };
    spec.word_prefix = optional_string("tokenizer.pagoda.wordpiece.word_prefix");
    spec.continuing_prefix = optional_string("tokenizer.pagoda.wordpiece.continuing_prefix");
    if (file.has("tokenizer.pagoda.wordpiece.max_input_chars_per_word"))
        spec.max_input_chars_per_word = file.get_int("tokenizer.pagoda.wordpiece.max_input_chars_per_word");
    spec.clean_text = optional_bool(file, "tokenizer.pagoda.wordpiece.clean_text");
    spec.handle_chinese_chars = optional_bool(file, "tokenizer.pagoda.wordpiece.handle_chinese_chars");
    spec.collapse_spaces = file.get_bool_or("tokenizer.pagoda.unigram.collapse_spaces", false);
    spec.prepend_scheme = file.get_string_or("tokenizer.pagoda.unigram.prepend_scheme", "");
    spec.split_words = file.get_bool_or("tokenizer.pagoda.unigram.split_words", false);
    spec.byte_fallback = file.get_bool_or("tokenizer.pagoda.unigram.byte_fallback", false);
    spec.charsmap_graphemes = file.get_bool_or("tokenizer.pagoda.unigram.charsmap_graphemes", false);
    if (file.has("tokenizer.pagoda.pair_template")) {
        for (const std::string& item : file.get_strings("tokenizer.pagoda.pair_template"))
            spec.pair_template.push_back(parse_template_piece(item, "tokenizer.pagoda.pair_template"));
    }
}

// gpt-oss's o200k_harmony: the message markers are text the output parser reads, so they render
// (and a grammar can spell them with their own tokens), and <|end|> only ends a message, not the
// turn (<|return|> and <|call|> do). llama.cpp renders the same markers but for <|end|>.
constexpr std::string_view kHarmonyMarkers[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"};

// Gemma 4: the thinking channel's and the tool calls' markers (and the <|"|> string quote of call
// arguments) are text the output parsers read (chat/reasoning.h, chat/tool_call_gemma4.h), so they
// render; <|tool_response>, which the model writes after its calls to wait for their results, ends
// generation (as Gemma 4's generation config lists it). llama.cpp renders them as the chat parser's
// preserved tokens.
constexpr std::string_view kGemma4Markers[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>"};

}  // namespace

VocabSpec vocab_spec_from_gguf(const gguf::File& file) {
    VocabSpec spec;
    if (!file.has("tokenizer.ggml.model")) fail("{}: no tokenizer (tokenizer.ggml.model is missing)", file.name());
    spec.model = file.get_string("tokenizer.ggml.model");
    if (spec.model != "llama" && spec.model != "gpt2" && spec.model != "gemma4" && spec.model != "bert" && spec.model != "t5")
        fail("{}: tokenizer model '{}' is not supported (pagoda supports 'llama' SentencePiece, 'gpt2' "
             "byte-level BPE, 'gemma4' SentencePiece-style BPE, 'bert' WordPiece and 't5' Unigram)",
             file.name(), spec.model);
    spec.pre = file.get_string_or("tokenizer.ggml.pre", "");
    if (!file.has("tokenizer.ggml.tokens")) fail("{}: tokenizer.ggml.tokens is missing", file.name());
    spec.tokens = file.get_strings("tokenizer.ggml.tokens");
    if (file.has("tokenizer.ggml.scores")) spec.scores = file.get_floats("tokenizer.ggml.scores");
    if (file.has("tokenizer.ggml.token_type")) spec.token_types = file.get_ints("tokenizer.ggml.token_type");
    if (spec.model == "gpt2" || spec.model == "gemma4") {
        if (!file.has("tokenizer.ggml.merges"))
            fail("{}: tokenizer.ggml.merges is missing (required by BPE vocabularies)", file.name());
        spec.merges = file.get_strings("tokenizer.ggml.merges");
    }
    spec.bos = optional_id(file, "tokenizer.ggml.bos_token_id");
    spec.eos = optional_id(file, "tokenizer.ggml.eos_token_id");
    spec.unk = optional_id(file, "tokenizer.ggml.unknown_token_id");
    spec.pad = optional_id(file, "tokenizer.ggml.padding_token_id");
    spec.sep = optional_id(file, "tokenizer.ggml.seperator_token_id");  // llama.cpp's spelling
    if (!spec.sep) spec.sep = optional_id(file, "tokenizer.ggml.separator_token_id");
    spec.eot = optional_id(file, "tokenizer.ggml.eot_token_id");
    spec.eom = optional_id(file, "tokenizer.ggml.eom_token_id");
    spec.fim_pre = optional_id(file, "tokenizer.ggml.fim_pre_token_id");
    spec.fim_suf = optional_id(file, "tokenizer.ggml.fim_suf_token_id");
    spec.fim_mid = optional_id(file, "tokenizer.ggml.fim_mid_token_id");
    // The older names of the first three (llama.cpp still reads them).
    if (!spec.fim_pre) spec.fim_pre = optional_id(file, "tokenizer.ggml.prefix_token_id");
    if (!spec.fim_suf) spec.fim_suf = optional_id(file, "tokenizer.ggml.suffix_token_id");
    if (!spec.fim_mid) spec.fim_mid = optional_id(file, "tokenizer.ggml.middle_token_id");
    spec.fim_pad = optional_id(file, "tokenizer.ggml.fim_pad_token_id");
    spec.fim_rep = optional_id(file, "tokenizer.ggml.fim_rep_token_id");
    spec.fim_sep = optional_id(file, "tokenizer.ggml.fim_sep_token_id");
    spec.add_bos = optional_bool(file, "tokenizer.ggml.add_bos_token");
    spec.add_eos = optional_bool(file, "tokenizer.ggml.add_eos_token");
    spec.add_space_prefix = optional_bool(file, "tokenizer.ggml.add_space_prefix");
    spec.name = file.get_string_or("general.name", "");
    // WordPiece and Unigram keys llama.cpp writes.
    spec.cls = optional_id(file, "tokenizer.ggml.cls_token_id");
    spec.mask = optional_id(file, "tokenizer.ggml.mask_token_id");
    spec.add_sep = optional_bool(file, "tokenizer.ggml.add_sep_token");
    spec.lowercase = optional_bool(file, "tokenizer.ggml.normalizer.lowercase");
    spec.strip_accents = optional_bool(file, "tokenizer.ggml.normalizer.strip_accents");
    spec.remove_extra_whitespaces = optional_bool(file, "tokenizer.ggml.remove_extra_whitespaces");
    if (const gguf::Value* v = file.find("tokenizer.ggml.precompiled_charsmap")) {
        const gguf::Array* a = v->as_array();
        if (!a || (a->element_type != gguf::ValueType::u8 && a->element_type != gguf::ValueType::i8))
            fail("{}: tokenizer.ggml.precompiled_charsmap must be an array of bytes", file.name());
        for (int64_t b : file.get_ints("tokenizer.ggml.precompiled_charsmap"))
            spec.precompiled_charsmap += static_cast<char>(static_cast<uint8_t>(b));
    }
    // pagoda's own keys for what llama.cpp's GGUF has no key for (written for Hugging Face folders
    // presented as GGUF, see hf_tokenizer.h).
    if (file.has("tokenizer.pagoda.pre_patterns")) spec.pre_patterns = file.get_strings("tokenizer.pagoda.pre_patterns");
    spec.ignore_merges = optional_bool(file, "tokenizer.pagoda.ignore_merges");
    if (file.has("tokenizer.pagoda.lstrip_ids")) spec.lstrip_ids = file.get_ints("tokenizer.pagoda.lstrip_ids");
    if (file.has("tokenizer.pagoda.rstrip_ids")) spec.rstrip_ids = file.get_ints("tokenizer.pagoda.rstrip_ids");
    read_encoder_pagoda_keys(file, spec);
    return spec;
}

Vocab Vocab::from_gguf(const gguf::File& file) {
    const VocabSpec spec = vocab_spec_from_gguf(file);
    try {
        return from_spec(spec);
    } catch (const Error& e) {
        fail("{}: {}", file.name(), e.what());
    }
}

Vocab Vocab::from_spec(const VocabSpec& spec) {
    Vocab v;
    if (spec.model == "llama") {
        v.type_ = VocabType::spm;
    } else if (spec.model == "gpt2" || spec.model == "gemma4") {
        v.type_ = VocabType::bpe;
    } else if (spec.model == "bert") {
        v.type_ = VocabType::wpm;
    } else if (spec.model == "t5") {
        v.type_ = VocabType::ugm;
    } else {
        fail("tokenizer model '{}' is not supported (pagoda supports 'llama', 'gpt2', 'gemma4', 'bert' and 't5')", spec.model);
    }
    const size_t n = spec.tokens.size();
    if (n == 0) fail("tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX)) fail("tokenizer.ggml.tokens has too many entries ({})", n);
    if (!spec.scores.empty() && spec.scores.size() != n)
        fail("tokenizer.ggml.scores has {} entries but there are {} tokens", spec.scores.size(), n);
    if (!spec.token_types.empty() && spec.token_types.size() != n)
        fail("tokenizer.ggml.token_type has {} entries but there are {} tokens", spec.token_types.size(), n);

    v.texts_ = spec.tokens;
    v.scores_ = spec.scores.empty() ? std::vector<float>(n, 0.0f) : spec.scores;
    v.types_.assign(n, TokenType::normal);
    v.token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (!spec.token_types.empty()) {
            int64_t t = spec.token_types[i];
            if (t < 0 || t > 6) fail("tokenizer.ggml.token_type[{}] = {} is not a valid token type (0..6)", i, t);
            v.types_[i] = static_cast<TokenType>(t);
        }
        // Later duplicates win, as in llama.cpp, so ids agree with files converted for it.
        v.token_to_id_[v.texts_[i]] = static_cast<int32_t>(i);
    }

    for (int b = 0; b < 256; ++b) {
        int32_t id = v.find(byte_token_text(static_cast<uint8_t>(b)));
        if (id == kNoToken) id = v.find(std::string(1, static_cast<char>(b)));
        v.byte_tokens_[b] = id;
    }

    // Per-model defaults (llama.cpp's), then the file's explicit values.
    PreTokenizerTraits traits;
    if (v.type_ == VocabType::spm) {
        if (!spec.pre_patterns.empty()) fail("pre-tokenizer patterns are given for a SentencePiece vocabulary (BPE only)");
        v.bos_ = 1;
        v.eos_ = 2;
        v.unk_ = 0;
        v.add_bos_ = true;
        v.add_space_prefix_ = true;
    } else if (v.type_ == VocabType::wpm || v.type_ == VocabType::ugm) {
        if (!spec.pre_patterns.empty()) fail("pre-tokenizer patterns are given for a {} vocabulary (BPE only)", spec.model);
        if (!spec.merges.empty()) fail("merges are given for a {} vocabulary (BPE only)", spec.model);
        if (v.type_ == VocabType::wpm) {  // llama.cpp's defaults: bert-base-uncased's ids
            v.cls_ = v.bos_ = 101;
            v.unk_ = 100;
            v.sep_ = 102;
            v.pad_ = 0;
            v.mask_ = 103;
            v.add_bos_ = v.add_sep_ = true;
        } else {  // llama.cpp's defaults: T5's ids
            v.eos_ = 1;
            v.unk_ = 2;
            v.pad_ = 0;
            v.add_eos_ = true;
            v.add_space_prefix_ = true;
        }
    } else {
        if (!spec.pre_patterns.empty()) {
            v.pre_ = spec.pre.empty() ? "custom" : spec.pre;
            v.pre_patterns_ = spec.pre_patterns;
            v.custom_pre_patterns_ = true;
        } else {
            // Like llama.cpp, the gemma4 model always takes the gemma4 pre-tokenizer, whatever the file says.
            const std::string pre = spec.model == "gemma4" ? std::string("gemma4") : spec.pre;
            const PreTokenizerDef* def = find_pre_tokenizer(pre);
            if (!def)
                fail("BPE pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; known: {}", spec.pre,
                     fmt::join(known_pre_tokenizer_names(), ", "));
            v.pre_ = pre.empty() ? "default" : pre;
            v.pre_patterns_ = def->patterns;
            traits = def->traits;
        }
        v.spm_style_bpe_ = traits.spm_style;
        // llama.cpp gives the gemma4 model no default ids (its files name them: <bos> 2, <eos> 1, ...).
        v.bos_ = traits.no_bos || traits.spm_style ? kNoToken : 11;
        v.eos_ = traits.spm_style ? kNoToken : 11;
        v.add_bos_ = traits.add_bos;
        v.ignore_merges_ = spec.ignore_merges.value_or(traits.ignore_merges);
        v.merge_ranks_.reserve(spec.merges.size());
        for (size_t i = 0; i < spec.merges.size(); ++i) {
            const std::string& m = spec.merges[i];
            // The separator is the first space after the first character (a piece never starts with it).
            size_t sep = m.empty() ? std::string::npos : m.find(' ', 1);
            if (sep == std::string::npos || sep + 1 >= m.size())
                fail("tokenizer.ggml.merges[{}] = '{}' is not of the form 'left right'", i, m);
            v.merge_ranks_.emplace(m, static_cast<int32_t>(i));  // first occurrence keeps its rank
        }
    }
    // Defaults may point past a tiny vocabulary; then the token simply does not exist.
    for (int32_t* id : {&v.bos_, &v.eos_, &v.unk_, &v.sep_, &v.cls_, &v.pad_, &v.mask_})
        if (!v.valid_id(*id)) *id = kNoToken;

    auto set_id = [&](int32_t& slot, const std::optional<int64_t>& value, const char* what) {
        if (!value) return;
        if (*value == -1) {
            slot = kNoToken;
            return;
        }
        if (!v.valid_id(*value)) fail("{} token id {} is out of range (vocabulary has {} tokens)", what, *value, n);
        slot = static_cast<int32_t>(*value);
    };
    set_id(v.bos_, spec.bos, "BOS");
    if (traits.no_bos) v.bos_ = kNoToken;
    set_id(v.eos_, spec.eos, "EOS");
    set_id(v.unk_, spec.unk, "unknown");
    set_id(v.pad_, spec.pad, "padding");
    set_id(v.sep_, spec.sep, "separator");
    set_id(v.eot_, spec.eot, "EOT");
    set_id(v.eom_, spec.eom, "EOM");
    set_id(v.cls_, spec.cls, "CLS");
    set_id(v.mask_, spec.mask, "mask");
    if (v.type_ == VocabType::wpm && !spec.bos && spec.cls) v.bos_ = v.cls_;  // BERT's "BOS" is its [CLS]
    if (spec.add_sep) v.add_sep_ = *spec.add_sep;
    if (v.add_sep_ && v.sep_ == kNoToken) v.add_sep_ = false;
    if (spec.add_bos) v.add_bos_ = *spec.add_bos;
    if (spec.add_eos) v.add_eos_ = *spec.add_eos;
    if (spec.add_space_prefix) v.add_space_prefix_ = *spec.add_space_prefix;
    v.nfc_ = spec.nfc;
    if (v.add_bos_ && v.bos_ == kNoToken) v.add_bos_ = false;
    if (v.add_eos_ && v.eos_ == kNoToken) v.add_eos_ = false;
    v.set_encoder_options(spec);

    // End-of-generation tokens are recognised by their text, as llama.cpp does: converted files
    // rarely name them. Such tokens are control tokens whatever the file says.
    auto make_control = [&](int32_t id) {
        if (v.types_[id] != TokenType::control) {
            log_debug("tokenizer: token {} '{}' looks like a control token; treating it as one", id, v.texts_[id]);
            v.types_[id] = TokenType::control;
        }
    };
    if (v.eot_ == kNoToken) {
        for (auto text : kEotTexts) {
            if (int32_t id = v.find(text); id != kNoToken) {
                v.eot_ = id;
                make_control(id);
                break;
            }
        }
    }
    if (v.eom_ == kNoToken) v.eom_ = v.find("<|eom_id|>");
    // Fill-in-the-middle tokens: the file's ids, else found by text (then control tokens). Pad, repo
    // and file separator end generation, as in llama.cpp: a completion reaching one has left the hole.
    auto find_fim = [&](int32_t& slot, const std::optional<int64_t>& value, const char* what, auto& texts) {
        set_id(slot, value, what);
        if (value) return;
        for (auto text : texts) {
            if (int32_t id = v.find(text); id != kNoToken) {
                slot = id;
                make_control(id);
                return;
            }
        }
    };
    find_fim(v.fim_.prefix, spec.fim_pre, "FIM prefix", kFimPrefixTexts);
    find_fim(v.fim_.suffix, spec.fim_suf, "FIM suffix", kFimSuffixTexts);
    find_fim(v.fim_.middle, spec.fim_mid, "FIM middle", kFimMiddleTexts);
    find_fim(v.fim_.pad, spec.fim_pad, "FIM pad", kFimPadTexts);
    find_fim(v.fim_.repo, spec.fim_rep, "FIM repo", kFimRepoTexts);
    find_fim(v.fim_.file_sep, spec.fim_sep, "FIM file separator", kFimSepTexts);
    for (int32_t id : {v.fim_.pad, v.fim_.repo, v.fim_.file_sep})
        if (id != kNoToken) v.eog_.insert(id);
    for (auto text : kEogTexts) {
        if (int32_t id = v.find(text); id != kNoToken) {
            v.eog_.insert(id);
            make_control(id);
        }
    }
    for (int32_t id : {v.eos_, v.eot_, v.eom_})
        if (id != kNoToken) v.eog_.insert(id);
    // o200k_harmony: see kHarmonyMarkers.
    if (const int32_t ret = v.find("<|return|>"), call = v.find("<|call|>"), end = v.find("<|end|>");
        ret != kNoToken && call != kNoToken && v.find("<|channel|>") != kNoToken && v.find("<|message|>") != kNoToken) {
        for (auto text : kHarmonyMarkers)
            if (int32_t id = v.find(text); id != kNoToken) v.types_[id] = TokenType::user_defined;
        if (end != kNoToken) {
            v.eog_.erase(end);
            if (v.eot_ == end) v.eot_ = ret;
            if (v.eos_ == end) v.eos_ = ret;
        }
        v.eog_.insert(ret);
        v.eog_.insert(call);
    }
    // Gemma 4: see kGemma4Markers.
    if (v.find("<|tool_call>") != kNoToken && v.find("<tool_call|>") != kNoToken && v.find("<|channel>") != kNoToken) {
        for (auto text : kGemma4Markers)
            if (int32_t id = v.find(text); id != kNoToken) v.types_[id] = TokenType::user_defined;
        if (const int32_t response = v.find("<|tool_response>"); response != kNoToken) v.eog_.insert(response);
    }

    for (int32_t id = 0; id < v.n_tokens(); ++id) {
        TokenType t = v.types_[id];
        if ((t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) &&
            !v.texts_[id].empty())
            v.literal_tokens_.push_back(id);
    }
    std::stable_sort(v.literal_tokens_.begin(), v.literal_tokens_.end(),
                     [&](int32_t a, int32_t b) { return v.texts_[a].size() > v.texts_[b].size(); });

    if (v.type_ == VocabType::spm) {
        constexpr std::string_view space = "\xE2\x96\x81";
        v.spm_words_independent_ = true;
        for (const std::string& t : v.texts_) {
            for (size_t at = t.find(space, 1); at != std::string::npos; at = t.find(space, at + 1)) {
                if (at < space.size() || t.compare(at - space.size(), space.size(), space) != 0) {
                    v.spm_words_independent_ = false;
                    break;
                }
            }
            if (!v.spm_words_independent_) break;
        }
    }

    // Phi-3 eats the whitespace after its special tokens (llama.cpp applies this by model name).
    if (contains_any(spec.name, {"phi-3", "phi3"})) {
        for (int32_t id : v.literal_tokens_) v.rstrip_.insert(id);
        if (int32_t id = v.find("</s>"); id != kNoToken) v.rstrip_.insert(id);
        for (auto text : {"<unk>", "<s>", "<|endoftext|>"})
            if (int32_t id = v.find(text); id != kNoToken) v.rstrip_.erase(id);
    }
    // Explicit strip flags (from a tokenizer.json's added tokens) on top of the name-based quirk.
    for (auto [ids, set, what] : {std::tuple{&spec.lstrip_ids, &v.lstrip_, "lstrip"}, std::tuple{&spec.rstrip_ids, &v.rstrip_, "rstrip"}}) {
        for (int64_t id : *ids) {
            if (!v.valid_id(id)) fail("{} token id {} is out of range (vocabulary has {} tokens)", what, id, n);
            set->insert(static_cast<int32_t>(id));
        }
    }
    return v;
}

int32_t Vocab::find(std::string_view text) const {
    auto it = token_to_id_.find(text);
    return it == token_to_id_.end() ? kNoToken : it->second;
}

int32_t Vocab::merge_rank(std::string_view left, std::string_view right) const {
    // Build the "left right" key in a per-thread buffer to avoid an allocation per lookup.
    thread_local std::string key;
    key.assign(left);
    key += ' ';
    key.append(right);
    auto it = merge_ranks_.find(std::string_view(key));
    return it == merge_ranks_.end() ? -1 : it->second;
}

int Vocab::byte_value(int32_t id) const {
    if (types_[id] != TokenType::byte) return -1;
    const std::string& t = texts_[id];
    if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
        int value = 0;
        for (int i = 3; i < 5; ++i) {
            char c = t[i];
            int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            value = value * 16 + d;
        }
        return value;
    }
    if (t.size() == 1) return static_cast<uint8_t>(t[0]);
    return -1;
}

}  // namespace pagoda::tokenizer
