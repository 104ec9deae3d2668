#include "tokenizer/utf8.h"

#include <algorithm>

namespace pagoda::tokenizer {

namespace {
// Expected total length from a lead byte; 0 for continuation bytes and bytes never valid as a lead.
size_t lead_length(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}
// The allowed range of the second byte depends on the lead byte (excludes overlongs, surrogates
// and code points above U+10FFFF); later bytes are plain continuation bytes.
bool second_byte_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
        case 0xE0: return b >= 0xA0 && b <= 0xBF;
        case 0xED: return b >= 0x80 && b <= 0x9F;
        case 0xF0: return b >= 0x90 && b <= 0xBF;
        case 0xF4: return b >= 0x80 && b <= 0x8F;
        default: return b >= 0x80 && b <= 0xBF;
    }
}
}  // namespace

DecodedChar utf8_decode(std::string_view text, size_t pos) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    uint8_t lead = s[pos];
    size_t len = lead_length(lead);
    if (len == 1) return {lead, 1};
    if (len == 0) return {kInvalidCodepoint, 1};
    // On failure, the whole valid-so-far prefix counts as one invalid unit (Unicode's "maximal
    // subpart" practice), so a truncated character becomes a single U+FFFD.
    size_t have = std::min(len, text.size() - pos);
    if (have < 2 || !second_byte_ok(lead, s[pos + 1])) return {kInvalidCodepoint, 1};
    for (size_t i = 2; i < have; ++i)
        if ((s[pos + i] & 0xC0) != 0x80) return {kInvalidCodepoint, i};
    if (have < len) return {kInvalidCodepoint, have};
    char32_t cp = lead & (0x7F >> len);
    for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (s[pos + i] & 0x3F);
    return {cp, len};
}

size_t utf8_sequence_length(std::string_view text, size_t pos) { return utf8_decode(text, pos).length; }

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

size_t utf8_incomplete_tail(std::string_view text) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    // A pending sequence is at most 3 bytes long (a 4-byte one missing its last byte).
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        uint8_t b = s[n - back];
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = lead_length(b);
        if (need <= back) return 0;  // ASCII, invalid lead, or a complete sequence
        // Check that what we have so far could still become valid.
        if (back >= 2 && !second_byte_ok(b, s[n - back + 1])) return 0;
        return back;
    }
    return 0;
}

std::string utf8_sanitize(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        DecodedChar c = utf8_decode(text, pos);
        if (c.codepoint == kInvalidCodepoint)
            out += "\xEF\xBF\xBD";
        else
            out.append(text.substr(pos, c.length));
        pos += c.length;
    }
    return out;
}

bool utf8_valid(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        const DecodedChar c = utf8_decode(text, i);
        if (c.codepoint == kInvalidCodepoint) return false;
        i += c.length;
    }
    return true;
}

}  // namespace pagoda::tokenizer
