// Extended grapheme clusters (Unicode UAX #29, the rules of Unicode 15.0: CR LF, controls, Hangul
// syllable sequences, extending marks and ZWJ, spacing marks, prepend characters, emoji ZWJ
// sequences, regional-indicator pairs), as Hugging Face's Precompiled normalizer walks text. A byte
// that is not valid UTF-8 is a cluster of its own. Data: unicode_props_tables.h.
#pragma once
#include <cstddef>
#include <string_view>

namespace pagoda::tokenizer {

// The end (byte offset) of the grapheme cluster that starts at `pos` (< text.size()).
size_t grapheme_end(std::string_view text, size_t pos);

}  // namespace pagoda::tokenizer
