#include "grammar/regex_to_gbnf.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/text_cursor.h"

namespace pagoda::grammar {
namespace {

inline constexpr int kMaxNesting = 64;

std::string class_char(uint32_t cp) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) return std::string(1, char(cp));
    if (cp < 0x100) return fmt::format("\\x{:02X}", cp);
    if (cp < 0x10000) return fmt::format("\\u{:04X}", cp);
    return fmt::format("\\U{:08X}", cp);
}

// A set of code points as a regex class denotes it.
struct Set {
    std::vector<CharRange> ranges;
    bool negated = false;
};

bool in_ranges(const std::vector<CharRange>& ranges, uint32_t cp) {
    return std::any_of(ranges.begin(), ranges.end(), [&](const CharRange& r) { return cp >= r.lo && cp <= r.hi; });
}

// The JSON-encoded form of one character of `s`: plain characters as a class, the ones JSON must
// escape as their escape sequences.
std::string json_chars(const Set& s) {
    const std::vector<std::pair<uint32_t, const char*>> escaped = {
        {'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""}, {'\t', "\"\\\\t\""}, {'\r', "\"\\\\r\""},
        {'\f', "\"\\\\f\""}, {'\b', "\"\\\\b\""}};
    std::vector<std::string> parts;
    std::string cls;
    if (s.negated) {
        cls = "[^\\x00-\\x1F\\x22\\x5C";
        for (const CharRange& r : s.ranges) cls += class_char(r.lo) + (r.hi != r.lo ? "-" + class_char(r.hi) : "");
        parts.push_back(cls + "]");
    } else {
        // The plain part: each range minus the control characters, '"' and '\'.
        std::string body;
        for (const CharRange& r : s.ranges) {
            uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
            for (uint32_t cut : {uint32_t('"'), uint32_t('\\')}) {
                if (lo > r.hi) break;
                if (cut >= lo && cut <= r.hi) {
                    if (cut > lo) body += class_char(lo) + (cut - 1 != lo ? "-" + class_char(cut - 1) : "");
                    lo = cut + 1;
                }
            }
            if (lo <= r.hi) body += class_char(lo) + (r.hi != lo ? "-" + class_char(r.hi) : "");
        }
        if (!body.empty()) parts.push_back("[" + body + "]");
    }
    for (const auto& [cp, text] : escaped)
        if (in_ranges(s.ranges, cp) != s.negated) parts.push_back(text);
    if (parts.empty()) return "[]";  // matches nothing
    if (parts.size() == 1) return parts[0];
    std::string out = "(";
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
    return out + ")";
}

// The raw-text form of one character of `s`: a class of code points.
std::string text_chars(const Set& s) {
    if (s.ranges.empty()) return s.negated ? "[\\x00-\\U0010FFFF]" : "[]";
    std::string cls = s.negated ? "[^" : "[";
    for (const CharRange& r : s.ranges) cls += class_char(r.lo) + (r.hi != r.lo ? "-" + class_char(r.hi) : "");
    return cls + "]";
}

class RegexTranslator : TextCursor {
public:
    // Empty `any_char`: raw text that the whole pattern matches (no JSON escapes, no unanchored sides).
    RegexTranslator(std::string_view pattern, const std::string& any_char) : any_(any_char) { load(pattern); }

    std::string run() {
        bool anchored_start = false, anchored_end = false;
        if (peek() == '^') anchored_start = true, ++pos_;
        std::string body = alternation(0);
        if (peek() == '$') anchored_end = true, ++pos_;
        if (pos_ < cps_.size()) unsupported(cps_[pos_] == ')' ? "an unbalanced ')'" : "'^' or '$' inside the pattern");
        std::string out;
        if (!anchored_start && !raw()) out += any_ + "* ";
        out += body;
        if (!anchored_end && !raw()) out += " " + any_ + "*";
        return "(" + out + ")";
    }

private:
    [[noreturn]] void error_at(size_t at, const std::string& what) const override {
        fail("pattern: {} (at character {})", what, at + 1);
    }
    [[noreturn]] void unsupported(const std::string& what) const { error(what + " is not supported"); }
    bool raw() const { return any_.empty(); }
    std::string chars(const Set& s) const { return raw() ? text_chars(s) : json_chars(s); }

    std::string alternation(int depth) {
        if (depth > kMaxNesting) unsupported("nesting this deep");
        std::vector<std::string> alts{concatenation(depth)};
        while (peek() == '|') {
            ++pos_;
            alts.push_back(concatenation(depth));
        }
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out + ")";
    }

    std::string concatenation(int depth) {
        std::string out;
        while (!at_end() && peek() != '|' && peek() != ')' && !(peek() == '$' && pos_ + 1 == cps_.size())) {
            std::string atom_text = atom(depth);
            atom_text += quantifier();
            out += (out.empty() ? "" : " ") + atom_text;
        }
        return out.empty() ? "\"\"" : "(" + out + ")";
    }

    std::string quantifier() {
        std::string q;
        const uint32_t c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++pos_;
            q = std::string(1, char(c));
        } else if (c == '{') {
            ++pos_;
            const uint32_t lo = decimal(kMaxRepetition);
            q = fmt::format("{{{}", lo);
            if (peek() == ',') {
                ++pos_;
                if (peek() == '}') q += ",";
                else {
                    const uint32_t hi = decimal(kMaxRepetition);
                    if (hi < lo) unsupported("a {m,n} quantifier with m > n");
                    q += fmt::format(",{}", hi);
                }
            }
            if (next() != '}') unsupported("a malformed {m,n} quantifier");
            q += "}";
        } else {
            return q;
        }
        if (peek() == '?') ++pos_;  // lazy: the same strings
        if (peek() == '+') unsupported("a possessive quantifier");
        if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') unsupported("a quantifier after a quantifier");
        return q;
    }

    // \d \w \s and their negations; `in_class` refuses the negated ones (no set difference here).
    bool shorthand(uint32_t e, Set& s, bool in_class) {
        const std::vector<CharRange> digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
            space{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};
        const std::vector<CharRange>* r = nullptr;
        switch (e) {
            case 'd': case 'D': r = &digit; break;
            case 'w': case 'W': r = &word; break;
            case 's': case 'S': r = &space; break;
            default: return false;
        }
        const bool negated = e == 'D' || e == 'W' || e == 'S';
        if (negated && in_class) unsupported("a negated shorthand (\\D, \\W, \\S) inside a class");
        s.ranges.insert(s.ranges.end(), r->begin(), r->end());
        s.negated = negated;
        return true;
    }

    // A single-character escape (after the backslash has been read).
    uint32_t escaped_char(uint32_t e) {
        switch (e) {
            case 'n': return '\n';
            case 't': return '\t';
            case 'r': return '\r';
            case 'f': return '\f';
            case 'v': return '\v';
            case '0': return 0;
            case 'x': return hex(2);
            case 'u': return hex(4);
            default: break;
        }
        if (std::string_view("\\/.-^$*+?()[]{}|\"'").find(char(e < 0x80 ? e : 0)) != std::string_view::npos && e < 0x80)
            return e;
        unsupported(fmt::format("the escape '\\{}'", e < 0x80 ? std::string(1, char(e)) : std::string("?")));
    }

    std::string atom(int depth) {
        const uint32_t c = next();
        Set s;
        switch (c) {
            case '(': {
                if (peek() == '?') {
                    if (peek(1) != ':') unsupported("lookaround or a named group");
                    pos_ += 2;
                }
                std::string inner = alternation(depth + 1);
                if (next() != ')') unsupported("an unclosed '('");
                return "(" + inner + ")";
            }
            case '[': return chars(char_class());
            case '.':
                s.ranges = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
                s.negated = true;
                return chars(s);
            case '\\': {
                const uint32_t e = next();
                if (shorthand(e, s, false)) return chars(s);
                if (e >= '1' && e <= '9') unsupported("a backreference");
                const uint32_t ch = escaped_char(e);
                s.ranges = {{ch, ch}};
                return chars(s);
            }
            case '*': case '+': case '?': case '{': case '}': --pos_; unsupported("a quantifier with nothing before it");
            case '^': case '$': --pos_; unsupported("'^' or '$' inside the pattern");
            default:
                s.ranges = {{c, c}};
                return chars(s);
        }
    }

    Set char_class() {
        Set s;
        if (peek() == '^') s.negated = true, ++pos_;
        while (peek() != ']' || at_end()) {  // "[]" is the empty class, as in ECMAScript
            if (at_end()) unsupported("an unterminated class");
            uint32_t lo = next();
            if (lo == '[' && (peek() == ':' || peek() == '=' || peek() == '.')) unsupported("POSIX classes");
            if (lo == '\\') {
                const uint32_t e = next();
                Set sh;
                if (shorthand(e, sh, true)) {
                    s.ranges.insert(s.ranges.end(), sh.ranges.begin(), sh.ranges.end());
                    continue;
                }
                lo = e == 'b' ? uint32_t('\b') : escaped_char(e);
            }
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < cps_.size()) {
                ++pos_;
                hi = next();
                if (hi == '\\') hi = escaped_char(next());
                if (hi < lo) unsupported("a reversed range");
            }
            s.ranges.push_back({lo, hi});
        }
        ++pos_;
        return s;
    }

    std::string any_;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, const std::string& any_char) {
    if (any_char.empty()) fail("regex_to_gbnf needs the rule for one JSON string character");
    return RegexTranslator(pattern, any_char).run();
}

std::string regex_to_gbnf_text(std::string_view pattern) {
    return RegexTranslator(pattern, {}).run();
}

}  // namespace pagoda::grammar
