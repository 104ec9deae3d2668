// A tokenizer vocabulary: token texts, scores and types, BPE merge ranks, special token ids and the
// per-model defaults (add BOS, dummy space prefix, pre-tokenizer name, WordPiece and Unigram text
// pipeline switches, the pair template), loaded from GGUF
// `tokenizer.ggml.*` keys or built from a VocabSpec in memory. Everything is validated at load time:
// a bad or missing key throws pagoda::Error naming it, so the tokenizers can index without checks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace pagoda::gguf {
class File;
}

namespace pagoda::tokenizer {

inline constexpr int32_t kNoToken = -1;

// GGUF tokenizer.ggml.model "llama" (SentencePiece BPE), "gpt2" (byte-level BPE), "bert" (WordPiece)
// and "t5" (SentencePiece Unigram).
enum class VocabType { spm, bpe, wpm, ugm };

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
    undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// One item of a post-processor template: a special token, or one of the texts (sequence 0 is A, 1 is B),
// with the token type id the items get (BERT's segment ids).
struct TemplatePiece {
    int32_t token = -1;  // -1: the text `sequence`
    int sequence = 0;
    int type_id = 0;
    bool operator==(const TemplatePiece&) const = default;
};

// Raw vocabulary description, as stored in GGUF. Optional fields fall back to llama.cpp's defaults.
struct VocabSpec {
    std::string model;  // "llama", "gpt2", "bert" or "t5"
    std::string pre;    // BPE pre-tokenizer name; empty means "default"
    std::vector<std::string> tokens;
    std::vector<float> scores;          // empty: all 0
    std::vector<int64_t> token_types;   // empty: all normal
    std::vector<std::string> merges;    // BPE only: "left right", highest priority first
    // Unset: the model kind's default (llama.cpp's); -1: the vocabulary has no such token.
    std::optional<int64_t> bos, eos, unk, pad, sep, eot, eom;
    // Fill-in-the-middle tokens (tokenizer.ggml.fim_*_token_id); unset ones are found by their text.
    std::optional<int64_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    std::optional<bool> add_bos, add_eos, add_space_prefix;
    std::string name;  // general.name; only used for a few model-specific quirks
    // Set by files that describe their pre-tokenizer by its regexes (Hugging Face tokenizer.json)
    // rather than by a GGUF name: BPE only; non-empty replaces the patterns `pre` would select
    // (`pre` then only names them in messages). Each must compile as a PCRE2 pattern.
    std::vector<std::string> pre_patterns;
    std::optional<bool> ignore_merges;              // BPE: overrides the pre-tokenizer name's default
    std::vector<int64_t> lstrip_ids, rstrip_ids;    // special tokens that eat the whitespace before / after them
    // Text is put in Unicode NFC before it is tokenized (tokenizer.json's NFC normalizer; GGUF has no key).
    bool nfc = false;

    // WordPiece and Unigram (encoder models).
    std::optional<int64_t> cls, mask;  // tokenizer.ggml.cls_token_id / mask_token_id
    std::optional<bool> add_sep;       // WordPiece: the separator goes after the text (llama.cpp's add_sep_token)
    // The pair template (tokens around two texts); empty: the model kind's default (vocab.h: pair_template()).
    std::vector<TemplatePiece> pair_template;
    // WordPiece: how word-start and continuation pieces are spelled. Hugging Face: "" and "##";
    // llama.cpp's GGUF: U+2581 and "" (its converter rewrites "##x" to "x" and "x" to "\u2581x").
    // Unset: llama.cpp's spelling (what a "bert" GGUF without pagoda's keys holds).
    std::optional<std::string> word_prefix, continuing_prefix;
    std::optional<int64_t> max_input_chars_per_word;  // longer words are one [UNK]; default 100
    // BERT normalizer switches; unset: lowercase true, strip_accents = lowercase, the other two true.
    std::optional<bool> lowercase, strip_accents, clean_text, handle_chinese_chars;
    // Unigram: SentencePiece's precompiled normalization rules (the binary blob; empty: none).
    std::string precompiled_charsmap;
    bool charsmap_graphemes = false;  // applied per grapheme cluster, as Hugging Face's Precompiled (charsmap.h)
    std::optional<bool> remove_extra_whitespaces;  // SentencePiece: trim, and collapse runs of spaces
    bool collapse_spaces = false;                  // tokenizer.json's Replace of " {2,}" by " " (XLM-R)
    // tokenizer.json's Metaspace: "always", "first" or "never" (no doubled U+2581 before a text that
    // starts with a space); empty: SentencePiece's dummy prefix, per add_space_prefix.
    std::string prepend_scheme;
    bool split_words = false;  // Metaspace split: each U+2581-led word is segmented on its own
    bool byte_fallback = false;  // Unigram: unknown pieces become <0xXX> byte tokens when all exist
};

// The BERT normalizer's switches, resolved.
struct BertOptions {
    bool lowercase = true, strip_accents = true, clean_text = true, handle_chinese_chars = true;
};

// Fill-in-the-middle token ids (kNoToken: absent). prefix/suffix/middle make infill possible;
// repo and file_sep mark repository-level context (Qwen2.5-Coder's <|repo_name|>, <|file_sep|>).
struct FimTokens {
    int32_t prefix = kNoToken, suffix = kNoToken, middle = kNoToken;
    int32_t pad = kNoToken, repo = kNoToken, file_sep = kNoToken;
    bool usable() const { return prefix != kNoToken && suffix != kNoToken && middle != kNoToken; }
};

// Hash that lets unordered maps keyed by std::string be searched with a string_view.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A pair-template item as pagoda's GGUF key stores it ("A:0", "B:1", "<token id>:<type id>"), and back.
TemplatePiece parse_template_piece(std::string_view item, std::string_view what);
std::string template_piece_text(const TemplatePiece& piece);

// The spec a GGUF file's tokenizer.ggml.* keys describe (throws naming the key when one is bad).
VocabSpec vocab_spec_from_gguf(const gguf::File& file);

class Vocab {
public:
    static Vocab from_gguf(const gguf::File& file);
    static Vocab from_spec(const VocabSpec& spec);  // throws pagoda::Error on invalid input

    VocabType type() const { return type_; }
    const std::string& pre() const { return pre_; }
    // BPE: the pre-tokenizer's regexes (the named ones, or the spec's own); empty for SentencePiece.
    const std::vector<std::string>& pre_patterns() const { return pre_patterns_; }
    bool custom_pre_patterns() const { return custom_pre_patterns_; }
    int32_t n_tokens() const { return static_cast<int32_t>(texts_.size()); }
    bool valid_id(int64_t id) const { return id >= 0 && id < n_tokens(); }

    const std::string& text(int32_t id) const { return texts_[id]; }
    float score(int32_t id) const { return scores_[id]; }
    TokenType token_type(int32_t id) const { return types_[id]; }
    bool is_control(int32_t id) const { return types_[id] == TokenType::control; }

    int32_t find(std::string_view text) const;  // kNoToken when absent
    // Rank of the BPE merge "left right" (lower merges first), or -1 when there is no such merge.
    int32_t merge_rank(std::string_view left, std::string_view right) const;
    // SPM byte-fallback token <0xXX>, or the single-byte token, or kNoToken.
    int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }
    // For a byte-type token <0xXX>: the byte; -1 otherwise.
    int byte_value(int32_t id) const;

    int32_t bos() const { return bos_; }
    int32_t eos() const { return eos_; }
    int32_t eot() const { return eot_; }
    int32_t eom() const { return eom_; }
    int32_t unk() const { return unk_; }
    int32_t pad() const { return pad_; }
    int32_t sep() const { return sep_; }
    int32_t cls() const { return cls_; }
    int32_t mask() const { return mask_; }
    bool add_sep() const { return add_sep_; }
    // The tokens (and type ids) around a pair of texts, for pair encoding (Tokenizer::encode_pair).
    const std::vector<TemplatePiece>& pair_template() const { return pair_template_; }
    // WordPiece.
    const std::string& word_prefix() const { return word_prefix_; }
    const std::string& continuing_prefix() const { return continuing_prefix_; }
    size_t max_input_chars_per_word() const { return max_input_chars_per_word_; }
    const BertOptions& bert_options() const { return bert_; }
    // Unigram.
    const std::string& precompiled_charsmap() const { return charsmap_; }
    bool charsmap_graphemes() const { return charsmap_graphemes_; }
    bool remove_extra_whitespaces() const { return remove_extra_whitespaces_; }
    bool collapse_spaces() const { return collapse_spaces_; }
    const std::string& prepend_scheme() const { return prepend_scheme_; }
    bool split_words() const { return split_words_; }
    bool byte_fallback() const { return byte_fallback_; }
    const FimTokens& fim() const { return fim_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    // BPE over U+2581-escaped raw UTF-8 with <0xXX> byte fallback (PreTokenizerTraits::spm_style).
    bool spm_style_bpe() const { return spm_style_bpe_; }
    bool ignore_merges() const { return ignore_merges_; }  // BPE: a whole word in the vocab skips merging
    bool nfc() const { return nfc_; }  // text is put in Unicode NFC first (unicode_nfc.h)
    // SPM: no token has a U+2581 right after another character, so no merge can cross the start of a
    // space-led word and words can be encoded independently (same result, much smaller merge queues).
    bool spm_words_independent() const { return spm_words_independent_; }
    bool is_eog(int32_t id) const { return eog_.count(id) != 0; }
    const std::unordered_set<int32_t>& eog_ids() const { return eog_; }

    // Tokens matched literally in input text before normal tokenization (control, user-defined and
    // unknown types), longest text first. User-defined ones always match; the others only when the
    // caller asks to parse special tokens.
    const std::vector<int32_t>& literal_tokens() const { return literal_tokens_; }
    // llama.cpp's per-token strip attributes (whitespace eaten next to a matched special token).
    bool rstrip(int32_t id) const { return rstrip_.count(id) != 0; }
    bool lstrip(int32_t id) const { return lstrip_.count(id) != 0; }

private:
    void set_encoder_options(const VocabSpec& spec);  // WordPiece / Unigram settings (vocab_encoder.cpp)
    // o200k_harmony (a vocabulary with <|channel|>, <|message|>, <|return|>, <|call|>): the message
    // markers <|start|> <|channel|> <|message|> <|constrain|> <|end|> are user-defined (rendered as
    // text), and <|end|> does not end generation.
    void apply_harmony_rules();

    VocabType type_ = VocabType::spm;
    std::string pre_ = "default";
    std::vector<std::string> pre_patterns_;
    bool custom_pre_patterns_ = false;
    bool spm_style_bpe_ = false;
    std::vector<std::string> texts_;
    std::vector<float> scores_;
    std::vector<TokenType> types_;
    TokenMap token_to_id_;
    TokenMap merge_ranks_;  // key "left right"
    int32_t byte_tokens_[256];
    int32_t bos_ = kNoToken, eos_ = kNoToken, eot_ = kNoToken, eom_ = kNoToken;
    int32_t unk_ = kNoToken, pad_ = kNoToken, sep_ = kNoToken, cls_ = kNoToken, mask_ = kNoToken;
    bool add_sep_ = false;
    std::vector<TemplatePiece> pair_template_;
    std::string word_prefix_, continuing_prefix_;
    size_t max_input_chars_per_word_ = 100;
    BertOptions bert_;
    std::string charsmap_;
    bool remove_extra_whitespaces_ = false, collapse_spaces_ = false, split_words_ = false, byte_fallback_ = false;
    bool charsmap_graphemes_ = false;
    std::string prepend_scheme_;
    FimTokens fim_;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, ignore_merges_ = false;
    bool spm_words_independent_ = false;
    bool nfc_ = false;
    std::unordered_set<int32_t> eog_;
    std::vector<int32_t> literal_tokens_;
    std::unordered_set<int32_t> rstrip_, lstrip_;
};

}  // namespace pagoda::tokenizer
