// WordPiece (BERT): each word becomes the greedy longest-match-first pieces of the vocabulary — the
// first spelled with the vocabulary's word-start prefix, the rest with its continuation prefix
// (Hugging Face: "" and "##"; llama.cpp's GGUF: U+2581 and ""). A word longer than
// max_input_chars_per_word characters, or one with a position no piece matches, is one unknown token.
// The caller has already normalized and split the text (bert_normalizer.h).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

void wordpiece_encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out);

}  // namespace pagoda::tokenizer
