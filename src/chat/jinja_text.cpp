#include "chat/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace pagoda::chat::jinja {

namespace {
constexpr char32_t kEscapeBase = 0xDC80;  // invalid byte b decodes to kEscapeBase + (b - 0x80)

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

std::u32string utf8_decode(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(text[i]);
        char32_t cp = 0;
        std::size_t len = 0;
        if (c < 0x80) { cp = c; len = 1; }
        else if (c >= 0xC2 && c < 0xE0) { cp = c & 0x1F; len = 2; }
        else if (c >= 0xE0 && c < 0xF0) { cp = c & 0x0F; len = 3; }
        else if (c >= 0xF0 && c < 0xF5) { cp = c & 0x07; len = 4; }
        bool ok = len > 0 && i + len <= n;
        for (std::size_t k = 1; ok && k < len; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if (!is_cont(cc)) ok = false;
            else cp = (cp << 6) | (cc & 0x3F);
        }
        // Reject overlong forms, surrogates and values past U+10FFFF.
        if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                   (cp >= 0xD800 && cp <= 0xDFFF)))
            ok = false;
        if (!ok) {
            out.push_back(c < 0x80 ? c : kEscapeBase + (c - 0x80));
            i += 1;
        } else {
            out.push_back(cp);
            i += len;
        }
    }
    return out;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp >= kEscapeBase && cp < kEscapeBase + 0x80) {
        out.push_back(static_cast<char>(0x80 + (cp - kEscapeBase)));
    } else if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string utf8_encode(std::u32string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char32_t cp : text) utf8_append(out, cp);
    return out;
}

std::size_t utf8_length(std::string_view text) {
    bool ascii = true;
    for (char c : text) if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
    return ascii ? text.size() : utf8_decode(text).size();
}

bool py_isspace(char32_t cp) {
    switch (cp) {
        case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
        case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
        case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
    const std::u32string text = utf8_decode(s);
    const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
    auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
    std::size_t b = 0, e = text.size();
    if (left) while (b < e && strippable(text[b])) ++b;
    if (right) while (e > b && strippable(text[e - 1])) --e;
    return utf8_encode(std::u32string_view(text).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, long maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw std::invalid_argument("empty separator");
        std::size_t start = 0;
        while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
            const std::size_t at = s.find(*sep, start);
            if (at == std::string_view::npos) break;
            out.emplace_back(s.substr(start, at - start));
            start = at + sep->size();
        }
        out.emplace_back(s.substr(start));
        return out;
    }
    const std::u32string text = utf8_decode(s);
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (true) {
        while (i < n && py_isspace(text[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<long>(out.size()) >= maxsplit) {
            std::size_t e = n;
            while (e > i && py_isspace(text[e - 1])) --e;
            out.push_back(utf8_encode(std::u32string_view(text).substr(i, e - i)));
            break;
        }
        std::size_t j = i;
        while (j < n && !py_isspace(text[j])) ++j;
        out.push_back(utf8_encode(std::u32string_view(text).substr(i, j - i)));
        i = j;
    }
    return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, long maxsplit) {
    if (maxsplit < 0) return py_split(s, sep, maxsplit);
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw std::invalid_argument("empty separator");
        std::size_t end = s.size();
        while (static_cast<long>(out.size()) < maxsplit) {
            if (end < sep->size()) break;
            const std::size_t at = s.rfind(*sep, end - sep->size());
            if (at == std::string_view::npos) break;
            out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
            end = at;
        }
        out.emplace_back(s.substr(0, end));
    } else {
        const std::u32string text = utf8_decode(s);
        std::size_t e = text.size();
        while (true) {
            while (e > 0 && py_isspace(text[e - 1])) --e;
            if (e == 0) break;
            if (static_cast<long>(out.size()) >= maxsplit) {
                std::size_t b = 0;
                while (b < e && py_isspace(text[b])) ++b;
                out.push_back(utf8_encode(std::u32string_view(text).substr(b, e - b)));
                break;
            }
            std::size_t b = e;
            while (b > 0 && !py_isspace(text[b - 1])) --b;
            out.push_back(utf8_encode(std::u32string_view(text).substr(b, e - b)));
            e = b;
        }
    }
    return {out.rbegin(), out.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s) {
    const std::u32string text = utf8_decode(s);
    std::vector<std::string> out;
    std::size_t start = 0, i = 0;
    const std::size_t n = text.size();
    auto is_break = [](char32_t c) {
        return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    };
    while (i < n) {
        if (is_break(text[i])) {
            out.push_back(utf8_encode(std::u32string_view(text).substr(start, i - start)));
            if (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') ++i;
            start = ++i;
        } else {
            ++i;
        }
    }
    if (start < n) out.push_back(utf8_encode(std::u32string_view(text).substr(start)));
    return out;
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to, long count) {
    std::string out;
    if (from.empty()) {
        // Python inserts `to` between every code point (and at both ends).
        const std::u32string text = utf8_decode(s);
        long done = 0;
        for (char32_t cp : text) {
            if (count < 0 || done < count) { out.append(to); ++done; }
            utf8_append(out, cp);
        }
        if (count < 0 || done < count) out.append(to);
        return out;
    }
    std::size_t start = 0;
    long done = 0;
    while (count < 0 || done < count) {
        const std::size_t at = s.find(from, start);
        if (at == std::string_view::npos) break;
        out.append(s.substr(start, at - start));
        out.append(to);
        start = at + from.size();
        ++done;
    }
    out.append(s.substr(start));
    return out;
}

namespace {

// Simple case mapping for Latin-1, Latin Extended-A, Greek and Cyrillic (what chat text needs);
// other scripts are left unchanged. Returns 0 when `cp` has no mapping.
char32_t map_upper(char32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 32;
    if (cp < 0x80) return 0;
    if (cp == 0xB5) return 0x39C;
    if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177)) return (cp & 1) ? cp - 1 : 0;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp & 1) ? 0 : cp - 1;
    if (cp == 0x3C2) return 0x3A3;
    if ((cp >= 0x3B1 && cp <= 0x3C1) || (cp >= 0x3C3 && cp <= 0x3CB)) return cp - 32;
    if (cp == 0x3AC) return 0x386;
    if (cp >= 0x3AD && cp <= 0x3AF) return cp - 37;
    if (cp == 0x3CC) return 0x38C;
    if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    return 0;
}

char32_t map_lower(char32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp < 0x80) return 0;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
    if (cp == 0x178) return 0xFF;
    if ((cp >= 0x100 && cp <= 0x137 && cp != 0x130) || (cp >= 0x14A && cp <= 0x177)) return (cp & 1) ? 0 : cp + 1;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp & 1) ? cp + 1 : 0;
    if ((cp >= 0x391 && cp <= 0x3A1) || (cp >= 0x3A3 && cp <= 0x3AB)) return cp + 32;
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 63;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    return 0;
}

bool is_cased(char32_t cp) { return map_upper(cp) != 0 || map_lower(cp) != 0 || cp == 0xDF; }

void append_upper(std::string& out, char32_t cp) {
    if (cp == 0xDF) {  // ß → SS, as Python does
        out += "SS";
        return;
    }
    const char32_t m = map_upper(cp);
    utf8_append(out, m ? m : cp);
}

void append_lower(std::string& out, char32_t cp) {
    if (cp == 0x130) {  // İ → i + combining dot above, as Python does
        out += "i\xCC\x87";
        return;
    }
    const char32_t m = map_lower(cp);
    utf8_append(out, m ? m : cp);
}

}  // namespace

std::string py_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t cp : utf8_decode(s)) append_upper(out, cp);
    return out;
}

std::string py_lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t cp : utf8_decode(s)) append_lower(out, cp);
    return out;
}

std::string py_capitalize(std::string_view s) {
    std::string out;
    bool first = true;
    for (char32_t cp : utf8_decode(s)) {
        if (first) append_upper(out, cp);
        else append_lower(out, cp);
        first = false;
    }
    return out;
}

std::string py_str_title(std::string_view s) {
    // Python: a cased character is uppercased after an uncased one, lowercased otherwise.
    std::string out;
    bool prev_cased = false;
    for (char32_t cp : utf8_decode(s)) {
        const bool cased = is_cased(cp);
        if (cased) {
            if (prev_cased) append_lower(out, cp);
            else append_upper(out, cp);
        } else {
            utf8_append(out, cp);
        }
        prev_cased = cased;
    }
    return out;
}

std::string jinja_title(std::string_view s) {
    // Jinja's |title: words start after '-', whitespace, '(', '{', '[' or '<'.
    std::string out;
    bool word_start = true;
    for (char32_t cp : utf8_decode(s)) {
        const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
        if (sep) {
            utf8_append(out, cp);
            word_start = true;
        } else if (word_start) {
            append_upper(out, cp);
            word_start = false;
        } else {
            append_lower(out, cp);
        }
    }
    return out;
}

std::string py_repr_string(std::string_view s) {
    const bool use_double = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
    const char quote = use_double ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t cp : utf8_decode(s)) {
        switch (cp) {
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (cp == static_cast<char32_t>(quote)) {
                    out.push_back('\\');
                    out.push_back(quote);
                } else if (cp < 0x20 || cp == 0x7F) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
                    out += buf;
                } else {
                    utf8_append(out, cp);
                }
        }
    }
    out.push_back(quote);
    return out;
}

std::string py_repr_float(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char buf[64];
    // Shortest round-trip digits in scientific form, e.g. "1.2345e+02".
    auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string sign;
    if (!sci.empty() && sci[0] == '-') { sign = "-"; sci.erase(0, 1); }
    const std::size_t epos = sci.find('e');
    std::string mantissa = sci.substr(0, epos);
    const int exponent = std::atoi(sci.c_str() + epos + 1);
    std::string digits;
    for (char c : mantissa) if (c != '.') digits.push_back(c);
    if (exponent >= -4 && exponent < 16) {
        std::string out;
        if (exponent < 0) {
            out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
        } else if (static_cast<int>(digits.size()) <= exponent + 1) {
            out = digits + std::string(static_cast<std::size_t>(exponent + 1 - static_cast<int>(digits.size())), '0') + ".0";
        } else {
            out = digits.substr(0, static_cast<std::size_t>(exponent + 1)) + "." + digits.substr(static_cast<std::size_t>(exponent + 1));
        }
        return sign + out;
    }
    std::string out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + out + ebuf;
}

}  // namespace pagoda::chat::jinja
