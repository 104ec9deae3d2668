// BERT's text pipeline before WordPiece, as Hugging Face's BertNormalizer + BertPreTokenizer run it:
// clean_text drops NUL, U+FFFD and "other" characters (C*) and turns whitespace into ' '; handle_chinese_chars
// puts spaces around CJK ideographs; strip_accents decomposes (NFD) and drops nonspacing marks (Mn);
// lowercase maps each code point to its full lowercase form. The words are then the runs between
// whitespace, with every punctuation character (ASCII punctuation or Unicode P*) a word of its own.
// Bytes that are not valid UTF-8 count as U+FFFD. llama.cpp's "bert" tokenizer runs the same steps.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

std::vector<std::string> bert_words(std::string_view text, const BertOptions& options);

}  // namespace pagoda::tokenizer
