// SentencePiece's precompiled normalization rules ("precompiled_charsmap": tokenizer.json's Precompiled
// normalizer and GGUF tokenizer.ggml.precompiled_charsmap; XLM-R, T5 and mT5 ship nmt_nfkc). The blob is
// a little-endian u32 byte size of a darts-clone double array (32-bit units, XOR-addressed children),
// that array, then NUL-terminated replacement strings the array's leaf values point into.
// normalize() walks the text as SentencePiece does: at each position the longest key that is a
// prefix of the rest is replaced; with no match, one UTF-8 character is copied (an invalid byte
// becomes U+FFFD), so the output is valid UTF-8. The constructor checks the sizes and that the strings
// are UTF-8; every lookup is bounds-checked, so a corrupt blob gives a pagoda::Error naming it, never
// an out-of-bounds read.
// normalize_graphemes() walks it as Hugging Face's Precompiled normalizer does instead: per grapheme
// cluster (grapheme.h), a cluster under 6 bytes is replaced whole by the replacement of the shortest
// key that prefixes it; otherwise (or without such a key) each character is looked up alone. The two
// agree on real charsmaps except for unusual clusters (several combining marks after a base that has
// a mapping; conjoining Hangul jamo, which only SentencePiece composes).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {

class Charsmap {
public:
    explicit Charsmap(std::string blob);  // throws pagoda::Error when malformed
    std::string normalize(std::string_view text) const;
    std::string normalize_graphemes(std::string_view text) const;

private:
    // The replacement for the longest (or the shortest) key that prefixes `text`, and its length;
    // length 0 when there is none.
    std::pair<std::string_view, size_t> match(std::string_view text, bool longest) const;
    std::string_view replacement(uint32_t value) const;
    uint32_t unit(size_t index) const;

    std::string blob_;
    std::vector<uint32_t> units_;
    std::string_view replacements_;
};

// A charsmap blob for the given key -> replacement rules (keys non-empty, no NUL bytes anywhere),
// built as darts-clone lays it out. For tests, fuzzing and random vocabularies.
std::string build_charsmap(const std::map<std::string, std::string>& rules);

}  // namespace pagoda::tokenizer
