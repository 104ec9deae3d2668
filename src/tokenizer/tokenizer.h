// Text <-> token ids for a GGUF vocabulary: SentencePiece ("llama"), byte-level BPE ("gpt2"), WordPiece
// ("bert") or Unigram ("t5"). encode_pair() lays two texts into the vocabulary's pair template (BERT's
// [CLS] a [SEP] b [SEP] with token type ids 0/1; XLM-R's <s> a </s></s> b </s>) for cross-encoders.
// encode() optionally parses special-token text, adds BOS/EOS per the vocabulary's defaults unless told
// otherwise. decode() turns ids back into valid UTF-8 (malformed byte sequences become U+FFFD); control
// and unknown tokens render as nothing unless asked. For SentencePiece vocabularies with a dummy
// prefix, the one leading space the encoder added is removed, so decode(encode(x)) == x for valid UTF-8.
// A Tokenizer is immutable after construction and safe to use from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::tokenizer {

class PreTokenizer;
class BpeEncoder;
class SpecialTokenMatcher;
class UnigramEncoder;

struct EncodeOptions {
    std::optional<bool> add_bos{};  // default: the vocabulary's add_bos
    std::optional<bool> add_eos{};  // default: the vocabulary's add_eos
    bool parse_special = false;   // match control-token texts such as "<|im_end|>" in the input
};

// Ids and their token type (segment) ids, one per id.
struct PairEncoding {
    std::vector<int32_t> ids;
    std::vector<int32_t> type_ids;
};

struct DecodeOptions {
    bool render_special = false;  // control/unknown tokens render as their text instead of nothing
};

class Tokenizer {
public:
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);  // throws pagoda::Error
    static std::unique_ptr<Tokenizer> from_vocab(Vocab vocab);
    ~Tokenizer();

    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
    // The pair template's tokens around the two texts (Hugging Face's encode(a, b) with special tokens).
    PairEncoding encode_pair(std::string_view a, std::string_view b, bool parse_special = false) const;
    std::string decode(const std::vector<int32_t>& ids, const DecodeOptions& options = {}) const;
    // The raw bytes one token stands for (may be part of a UTF-8 character; no leading-space rule).
    std::string token_to_piece(int32_t id, bool render_special = false) const;

    const Vocab& vocab() const { return vocab_; }
    int32_t n_vocab() const { return vocab_.n_tokens(); }
    int32_t bos() const { return vocab_.bos(); }
    int32_t eos() const { return vocab_.eos(); }
    int32_t eot() const { return vocab_.eot(); }
    bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
    // Whether decode() removes one leading space (SentencePiece dummy prefix, WordPiece's first word).
    bool strips_leading_space() const;

private:
    explicit Tokenizer(Vocab vocab);
    void encode_text(std::string_view text, bool after_special, bool first, std::vector<int32_t>& out) const;
    void encode_text_normalized(std::string_view text, bool after_special, bool first, std::vector<int32_t>& out) const;
    std::string wordpiece_piece(int32_t id, bool render_special) const;

    Vocab vocab_;
    std::unique_ptr<PreTokenizer> pre_;
    std::unique_ptr<BpeEncoder> bpe_;
    std::unique_ptr<SpecialTokenMatcher> specials_;
    std::unique_ptr<UnigramEncoder> ugm_;
};

}  // namespace pagoda::tokenizer
