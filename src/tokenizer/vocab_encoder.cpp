// The WordPiece and Unigram parts of a Vocab: their text-pipeline switches, checked, and the pair
// template (contract in vocab.h).
#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

namespace {

// The pair template a vocabulary of this kind uses when the spec gives none: BERT's [CLS] A [SEP] B [SEP]
// (B's part has type id 1), RoBERTa's <s> A </s></s> B </s> for a Unigram vocabulary with a BOS
// (XLM-R), else the single template twice with B's part typed 1.
std::vector<TemplatePiece> default_pair_template(const Vocab& v) {
    std::vector<TemplatePiece> out;
    auto token = [&](int32_t id, int type) { out.push_back({id, 0, type}); };
    auto text = [&](int seq, int type) { out.push_back({kNoToken, seq, type}); };
    auto ends = [&](int type) {
        if (v.add_eos()) token(v.eos(), type);
        if (v.add_sep()) token(v.sep(), type);
    };
    if (v.type() == VocabType::ugm && v.add_bos() && v.add_eos()) {
        token(v.bos(), 0), text(0, 0), token(v.eos(), 0), token(v.eos(), 0), text(1, 0), token(v.eos(), 0);
        return out;
    }
    if (v.add_bos()) token(v.bos(), 0);
    text(0, 0);
    ends(0);
    if (v.add_bos() && v.type() != VocabType::wpm) token(v.bos(), 1);
    text(1, 1);
    ends(1);
    return out;
}

void check_template(const Vocab& v, const std::vector<TemplatePiece>& items) {
    int texts[2] = {0, 0};
    for (const TemplatePiece& p : items) {
        if (p.type_id < 0 || p.type_id > 255) fail("pair template type id {} is out of range (0..255)", p.type_id);
        if (p.token == kNoToken) {
            if (p.sequence != 0 && p.sequence != 1) fail("pair template names text {} (only A and B exist)", p.sequence);
            ++texts[p.sequence];
        } else if (!v.valid_id(p.token)) {
            fail("pair template token id {} is out of range (vocabulary has {} tokens)", p.token, v.n_tokens());
        }
    }
    if (texts[0] != 1 || texts[1] != 1) fail("the pair template must hold text A once and text B once");
}

}  // namespace

TemplatePiece parse_template_piece(std::string_view item, std::string_view what) {
    // "A:0", "B:1" (the texts) or "<token id>:<type id>".
    const size_t colon = item.find(':');
    auto number = [&](std::string_view digits) {
        int64_t value = 0;
        if (digits.empty() || digits.size() > 9) fail("{}: '{}' is not of the form A:type, B:type or id:type", what, item);
        for (char c : digits) {
            if (c < '0' || c > '9') fail("{}: '{}' is not of the form A:type, B:type or id:type", what, item);
            value = value * 10 + (c - '0');
        }
        return value;
    };
    if (colon == std::string_view::npos) fail("{}: '{}' is not of the form A:type, B:type or id:type", what, item);
    TemplatePiece p;
    const std::string_view head = item.substr(0, colon);
    p.type_id = static_cast<int>(number(item.substr(colon + 1)));
    if (head == "A" || head == "B")
        p.sequence = head == "A" ? 0 : 1;
    else
        p.token = static_cast<int32_t>(number(head));
    return p;
}

std::string template_piece_text(const TemplatePiece& p) {
    if (p.token == kNoToken) return fmt::format("{}:{}", p.sequence == 0 ? "A" : "B", p.type_id);
    return fmt::format("{}:{}", p.token, p.type_id);
}

void Vocab::set_encoder_options(const VocabSpec& spec) {
    if (type_ == VocabType::wpm) {
        word_prefix_ = spec.word_prefix.value_or("\xE2\x96\x81");
        continuing_prefix_ = spec.continuing_prefix.value_or("");
        if (word_prefix_ == continuing_prefix_)
            fail("WordPiece word-start and continuation prefixes are both '{}': pieces would be ambiguous", word_prefix_);
        const int64_t max_chars = spec.max_input_chars_per_word.value_or(100);
        if (max_chars < 1 || max_chars > 1'000'000)
            fail("WordPiece max_input_chars_per_word = {} is out of range (1..1000000)", max_chars);
        max_input_chars_per_word_ = static_cast<size_t>(max_chars);
        bert_.lowercase = spec.lowercase.value_or(true);
        bert_.strip_accents = spec.strip_accents.value_or(bert_.lowercase);
        bert_.clean_text = spec.clean_text.value_or(true);
        bert_.handle_chinese_chars = spec.handle_chinese_chars.value_or(true);
        if (unk_ == kNoToken) fail("a WordPiece vocabulary needs an unknown token (tokenizer.ggml.unknown_token_id)");
    }
    if (type_ == VocabType::ugm) {
        if (!spec.precompiled_charsmap.empty()) Charsmap check(spec.precompiled_charsmap);  // throws when malformed
        charsmap_ = spec.precompiled_charsmap;
        charsmap_graphemes_ = spec.charsmap_graphemes;
        remove_extra_whitespaces_ = spec.remove_extra_whitespaces.value_or(false);
        collapse_spaces_ = spec.collapse_spaces;
        prepend_scheme_ = spec.prepend_scheme;
        if (!prepend_scheme_.empty() && prepend_scheme_ != "always" && prepend_scheme_ != "first" && prepend_scheme_ != "never")
            fail("Unigram prepend scheme '{}' is not one of always, first, never", prepend_scheme_);
        split_words_ = spec.split_words;
        byte_fallback_ = spec.byte_fallback;
    } else if (!spec.precompiled_charsmap.empty()) {
        fail("a precompiled charsmap is given for a '{}' vocabulary (Unigram only)", spec.model);
    }
    if (!spec.pair_template.empty()) {
        check_template(*this, spec.pair_template);
        pair_template_ = spec.pair_template;
    } else {
        pair_template_ = default_pair_template(*this);
    }
}

}  // namespace pagoda::tokenizer
