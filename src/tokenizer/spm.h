// SentencePiece (BPE-mode) encoding of one text fragment, as llama.cpp and SentencePiece do it:
// start from single UTF-8 characters and repeatedly merge the adjacent pair whose concatenation is
// a vocabulary token with the highest score (ties: leftmost), using a priority queue with lazy
// invalidation (O(n log n)). Pieces left that are not tokens fall back to <0xXX> byte tokens, or the
// unknown token when the vocabulary has no byte tokens.
// The caller has already applied the whitespace escaping (' ' -> U+2581) and the dummy prefix.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace pagoda::tokenizer
