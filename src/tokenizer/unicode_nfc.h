// Unicode Normalization Form C (UAX #15), as tokenizer.json's "NFC" normalizer applies it before
// tokenizing: canonical decomposition, canonical ordering of combining marks, then canonical
// composition, so "e" + U+0301 becomes "é" (U+00E9) and tokenizes as the precomposed form does.
// Data: unicode_nfc_tables.h (generated from the Unicode Character Database; Hangul is algorithmic).
// Bytes that are not valid UTF-8 are copied unchanged and act as boundaries nothing composes across.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {

std::string nfc(std::string_view utf8);
// True when nfc(utf8) == utf8 is certain without running it (ASCII only, the common case).
bool nfc_trivially_unchanged(std::string_view utf8);
// Unicode NFD of valid code points: canonical decomposition and canonical ordering, no composition
// (what BERT's strip_accents runs before it drops nonspacing marks).
std::vector<char32_t> nfd(const std::vector<char32_t>& codepoints);

}  // namespace pagoda::tokenizer
