// Unigram (SentencePiece's unigram model: XLM-R, multilingual-e5, bge-m3, T5). A text fragment is
// normalized — the precompiled charsmap (charsmap.h; per grapheme cluster for tokenizer.json's), extra spaces removed (SentencePiece's
// remove_extra_whitespaces) or runs of spaces collapsed (tokenizer.json's Replace), spaces shown as
// U+2581 and one U+2581 prepended (SentencePiece's dummy prefix, or Metaspace's prepend scheme) —
// optionally split before every U+2581 (Metaspace split), and each piece is segmented by Viterbi: the
// sequence of vocabulary pieces (normal, user-defined and unused tokens) with the highest total score.
// A character no piece covers costs the lowest score minus 10 and becomes the unknown token; adjacent
// unknowns fuse into one, which byte fallback replaces by its <0xXX> byte tokens when they all exist.
// Ties keep the first candidate found (pieces ending at a position, earliest start first), as
// SentencePiece, Hugging Face and llama.cpp do. Immutable after construction; thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

class Charsmap;

class UnigramEncoder {
public:
    explicit UnigramEncoder(const Vocab& vocab);
    ~UnigramEncoder();
    // `first`: the fragment starts the input (Metaspace's prepend scheme "first" prepends only there).
    void encode(std::string_view text, bool first, std::vector<int32_t>& out) const;
    // The normalized text encode() segments (for tests).
    std::string normalize(std::string_view text, bool first) const;

private:
    void segment(std::string_view piece, std::vector<int32_t>& out) const;
    int32_t find_piece(std::string_view text) const;

    const Vocab& vocab_;
    std::unique_ptr<Charsmap> charsmap_;
    TokenMap pieces_;
    size_t max_piece_bytes_ = 0;
    double unk_score_ = 0;
};

}  // namespace pagoda::tokenizer
