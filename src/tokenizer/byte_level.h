// GPT-2's reversible byte <-> Unicode mapping used by byte-level BPE vocabularies: every byte gets a
// printable code point (printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..U+0143
// in byte order), so token texts never contain raw control bytes or spaces (' ' is "Ġ", U+0120).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::tokenizer {

// Appends the byte-level form of every byte of `raw`.
void byte_level_encode(std::string_view raw, std::string& out);

// Appends the raw bytes a byte-level token text stands for. Characters outside the byte-level
// alphabet (possible in hand-made vocabularies) are copied through unchanged.
void byte_level_decode(std::string_view encoded, std::string& out);

// The code point byte `b` maps to.
char32_t byte_to_codepoint(uint8_t b);

}  // namespace pagoda::tokenizer
