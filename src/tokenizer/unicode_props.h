// Character properties for the WordPiece (BERT) text pipeline, as Hugging Face's tokenizers defines
// them (Rust's char methods and the unicode_categories crate): White_Space, nonspacing marks (Mn,
// what strip_accents drops after NFD), punctuation (P*), "other" (C*: control, format, private use,
// surrogate, unassigned — what clean_text drops), the CJK ideograph blocks BERT isolates, and the
// per-code-point full lowercase mapping. Data: unicode_props_tables.h (Unicode 15.0).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {

bool is_white_space(char32_t cp);
bool is_nonspacing_mark(char32_t cp);
bool is_punctuation(char32_t cp);       // Unicode P*
bool is_other(char32_t cp);             // Unicode C* and unassigned
bool is_bert_punctuation(char32_t cp);  // ASCII punctuation (some of it is Unicode Symbol) or P*
bool is_cjk_ideograph(char32_t cp);     // the ranges BERT's handle_chinese_chars pads with spaces
// Appends cp's lowercase form (one or two code points) to out.
void append_lowercase(std::vector<char32_t>& out, char32_t cp);

}  // namespace pagoda::tokenizer
