// Small text helpers the streaming output parsers (reasoning, tool_calls) share: JSON/ASCII white
// space, and how much of a text's end could still be the start of a tag (to hold back).
#pragma once
#include <algorithm>
#include <string_view>

namespace pagoda::chat {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline size_t skip_space(std::string_view s, size_t i = 0) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
}

inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
inline size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

}  // namespace pagoda::chat
