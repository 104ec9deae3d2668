// UTF-8 helpers for the tokenizers. Decoding is lenient by design: tokenizers must accept any byte
// string, so a malformed sequence is reported as a single invalid byte (length 1) rather than an error,
// and the caller decides what to do with it (byte fallback, U+FFFD, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::tokenizer {

inline constexpr char32_t kInvalidCodepoint = 0xFFFFFFFF;

// Length of the UTF-8 character (or invalid unit) starting at text[pos].
size_t utf8_sequence_length(std::string_view text, size_t pos);

// The code point at text[pos] and its length; an invalid unit gives {kInvalidCodepoint, its length}.
struct DecodedChar {
    char32_t codepoint;
    size_t length;
};
DecodedChar utf8_decode(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of a valid Unicode scalar value.
void utf8_append(std::string& out, char32_t codepoint);

// How many bytes at the end of `text` form the start of a UTF-8 sequence that is not yet complete
// (0 when the text ends on a character boundary or with bytes that can never become valid).
size_t utf8_incomplete_tail(std::string_view text);

// True when every unit of `text` decodes to a valid character.
bool utf8_valid(std::string_view text);
// Replaces every invalid unit with one U+FFFD.
std::string utf8_sanitize(std::string_view text);

}  // namespace pagoda::tokenizer
