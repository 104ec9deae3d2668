// Reading a tokenizer.json's WordPiece or Unigram model (contract in hf_tokenizer_encoder.h).
#include "tokenizer/hf_tokenizer_encoder.h"

namespace pagoda::tokenizer::hf {

namespace {

void read_wordpiece(const EncoderModelJson& m, VocabSpec& spec, const IdOf& id_of) {
    const TextPipeline& p = m.pipeline;
    if (p.byte_level || p.spm_spaces || p.prepend_space || p.charsmap || p.collapse_spaces || !p.patterns.empty() || p.nfc)
        m.root.fail("a WordPiece model takes a BertNormalizer and a BertPreTokenizer; other normalizer or pre-tokenizer "
                    "steps are not supported with it");
    if (!p.bert_pre_tokenizer)
        (m.root / "pre_tokenizer").fail("a WordPiece model needs a BertPreTokenizer (pagoda supports no other split for it)");
    spec.model = "bert";
    if (p.bert) {
        spec.lowercase = p.bert->lowercase;
        spec.strip_accents = p.bert->strip_accents.value_or(*p.bert->lowercase);
        spec.clean_text = p.bert->clean_text;
        spec.handle_chinese_chars = p.bert->handle_chinese_chars;
    } else {  // no normalizer: the text as it is
        spec.lowercase = spec.strip_accents = spec.clean_text = spec.handle_chinese_chars = false;
    }
    spec.word_prefix = "";
    spec.continuing_prefix = optional_string(m.model, "continuing_subword_prefix", m.model_at).value_or("##");
    if (const Json* max = member(m.model, "max_input_chars_per_word")) {
        if (!max->is_number_unsigned() || max->get<uint64_t>() < 1 || max->get<uint64_t>() > 1'000'000)
            (m.model_at / "max_input_chars_per_word").fail("must be an integer in 1..1000000");
        spec.max_input_chars_per_word = max->get<int64_t>();
    }
    const std::string unk = optional_string(m.model, "unk_token", m.model_at).value_or("[UNK]");
    spec.unk = id_of(unk, m.model_at / "unk_token");
    spec.token_types[*spec.unk] = int64_t(TokenType::unknown);
    check_decoder(m.tokenizer_json, m.root, true, *spec.continuing_prefix);
}

void read_unigram(const EncoderModelJson& m, VocabSpec& spec, const std::vector<float>& scores) {
    const TextPipeline& p = m.pipeline;
    if (p.byte_level || p.bert || p.bert_pre_tokenizer || !p.patterns.empty() || p.nfc)
        m.root.fail("a Unigram model takes Precompiled / Replace normalizers and a Metaspace pre-tokenizer; other steps "
                    "(ByteLevel, BertNormalizer, regex splits, NFC) are not supported with it");
    if (!p.metaspace)
        (m.root / "pre_tokenizer").fail("a Unigram model needs a Metaspace pre-tokenizer (SentencePiece's \u2581 spaces)");
    if (p.normalized_spaces || (p.prepend_space && p.prepend_scheme.empty()))
        (m.root / "normalizer").fail("a Unigram model with spaces replaced or \u2581 prepended by the normalizer is not supported "
                                     "(pagoda reads SentencePiece's spaces from the Metaspace step)");
    spec.model = "t5";
    spec.scores.assign(spec.tokens.size(), 0.0f);
    std::copy(scores.begin(), scores.end(), spec.scores.begin());
    if (p.charsmap) spec.precompiled_charsmap = *p.charsmap;
    spec.charsmap_graphemes = !spec.precompiled_charsmap.empty();  // Precompiled works per grapheme cluster
    spec.collapse_spaces = p.collapse_spaces;
    spec.remove_extra_whitespaces = p.whitespace_split;
    spec.prepend_scheme = p.prepend_scheme;
    spec.split_words = p.metaspace_split || p.whitespace_split;
    spec.add_space_prefix = p.prepend_scheme != "never";
    spec.byte_fallback = m.byte_fallback;
    check_decoder(m.tokenizer_json, m.root);
}

}  // namespace

void read_encoder_model(const std::string& type, const EncoderModelJson& m, VocabSpec& spec, const IdOf& id_of,
                        const std::vector<float>& unigram_scores) {
    if (type == "WordPiece")
        read_wordpiece(m, spec, id_of);
    else
        read_unigram(m, spec, unigram_scores);
}

}  // namespace pagoda::tokenizer::hf
