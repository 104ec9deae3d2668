// Python-compatible string helpers for the Jinja interpreter. Template strings are UTF-8; Python
// strings are sequences of code points, so indexing, slicing, length and whitespace follow code
// points here too. Bytes that are not valid UTF-8 survive a decode/encode round trip unchanged
// (each maps to a private code point 0xDC80+byte, as Python's "surrogateescape" does).
// Case mapping (upper/lower/title/capitalize) covers Latin-1, Latin Extended-A, Greek and
// Cyrillic (simple mappings plus ß→SS and İ→i̇); letters of other scripts are kept as they are.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat::jinja {

std::u32string utf8_decode(std::string_view text);
std::string utf8_encode(std::u32string_view text);
void utf8_append(std::string& out, char32_t cp);
std::size_t utf8_length(std::string_view text);  // number of code points

bool py_isspace(char32_t cp);  // Python's str.isspace for one code point

// str.strip / lstrip / rstrip; `chars` absent means Python whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, long maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, long maxsplit);
// str.splitlines() (without keepends).
std::vector<std::string> py_splitlines(std::string_view s);
// str.replace(old, new, count=-1).
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, long count);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // first upper, rest lower
std::string py_str_title(std::string_view s);   // Python str.title()
std::string jinja_title(std::string_view s);    // Jinja's |title filter (words split at -, space, ( { [ <)

// Python repr() of a string: single quotes unless the text has ' and no ".
std::string py_repr_string(std::string_view s);
// Python repr() of a float (shortest round trip, '1.0', '1e+20', 'inf', 'nan').
std::string py_repr_float(double value);

}  // namespace pagoda::chat::jinja
