#include "grammar/gbnf_parser.h"

#include <vector>

#include "core/error.h"
#include "grammar/text_cursor.h"

namespace pagoda::grammar {
namespace {

inline constexpr int kMaxNesting = 128;

bool is_name_char(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser : TextCursor {
public:
    explicit Parser(std::string_view text) { load(text); }

    GrammarSpec run() {
        GrammarSpec spec;
        skip_space();
        if (at_end()) error("the grammar is empty (expected a rule such as: root ::= \"yes\")");
        while (!at_end()) {
            const size_t at = pos_;
            SpecRule rule;
            rule.name = name();
            skip_space();
            if (!consume("::=")) error("expected '::=' after the rule name '" + rule.name + "'");
            for (const SpecRule& r : spec.rules)
                if (r.name == rule.name) error_at(at, "rule '" + rule.name + "' is defined twice");
            rule.alternatives = alternatives(0);
            if (!at_end() && peek() == ')') error("unbalanced ')'");
            spec.rules.push_back(std::move(rule));
        }
        return spec;
    }

private:
    [[noreturn]] void error_at(size_t at, const std::string& what) const override {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < cps_.size(); ++i) {
            if (cps_[i] == '\n') ++line, col = 1;
            else ++col;
        }
        fail("grammar: line {}, column {}: {}", line, col, what);
    }

    bool consume(std::string_view s) {
        for (size_t i = 0; i < s.size(); ++i)
            if (peek(i) != uint32_t(s[i])) return false;
        pos_ += s.size();
        return true;
    }

    void skip_space() {
        while (!at_end()) {
            const uint32_t c = peek();
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++pos_;
            else if (c == '#')
                while (!at_end() && peek() != '\n') ++pos_;
            else break;
        }
    }

    std::string name() {
        std::string out;
        while (!at_end() && is_name_char(peek())) out += char(next());
        if (out.empty()) error("expected a rule name");
        return out;
    }

    // Whether a `name ::=` starts here: the end of the current rule.
    bool at_rule_start() const {
        size_t i = pos_;
        while (i < cps_.size() && is_name_char(cps_[i])) ++i;
        if (i == pos_) return false;
        while (i < cps_.size() && (cps_[i] == ' ' || cps_[i] == '\t' || cps_[i] == '\n' || cps_[i] == '\r')) ++i;
        return i + 2 < cps_.size() && cps_[i] == ':' && cps_[i + 1] == ':' && cps_[i + 2] == '=';
    }

    std::vector<SpecAlternative> alternatives(int depth) {
        if (depth > kMaxNesting) error("groups nest too deeply");
        std::vector<SpecAlternative> alts;
        alts.push_back(sequence(depth));
        while (peek() == '|') {
            ++pos_;
            alts.push_back(sequence(depth));
        }
        return alts;
    }

    SpecAlternative sequence(int depth) {
        SpecAlternative seq;
        for (;;) {
            skip_space();
            if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) return seq;
            SpecItem item = atom(depth);
            skip_space();
            repetition(item);
            seq.items.push_back(std::move(item));
        }
    }

    SpecItem atom(int depth) {
        const uint32_t c = peek();
        SpecItem item;
        if (c == '"') {
            ++pos_;
            std::vector<uint32_t> chars;
            while (peek() != '"') {
                if (at_end()) error("unterminated string literal");
                chars.push_back(literal_char());
            }
            ++pos_;
            if (chars.size() == 1) {
                item.chars = CharClass::single(chars[0]);
                return item;
            }
            item.kind = SpecItem::Kind::group;
            item.alternatives.emplace_back();
            for (uint32_t ch : chars) {
                SpecItem one;
                one.chars = CharClass::single(ch);
                item.alternatives[0].items.push_back(std::move(one));
            }
            return item;
        }
        if (c == '[') {
            ++pos_;
            item.chars = char_class();
            return item;
        }
        if (c == '.') {
            ++pos_;
            item.chars.negated = true;  // the complement of nothing: any character
            return item;
        }
        if (c == '(') {
            const size_t open = pos_++;
            item.kind = SpecItem::Kind::group;
            item.alternatives = alternatives(depth + 1);
            if (peek() != ')') error_at(open, "unclosed '('");
            ++pos_;
            return item;
        }
        if (is_name_char(c)) {
            item.kind = SpecItem::Kind::rule;
            item.rule = name();
            return item;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') error("a repetition operator needs something before it");
        error("unexpected character");
    }

    CharClass char_class() {
        CharClass cls;
        if (peek() == '^') {
            cls.negated = true;
            ++pos_;
        }
        while (peek() != ']') {
            if (at_end()) error("unterminated character class");
            const size_t at = pos_;
            const uint32_t lo = literal_char();
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < cps_.size()) {
                ++pos_;
                hi = literal_char();
                if (hi < lo) error_at(at, "character range is reversed");
            }
            cls.ranges.push_back({lo, hi});
        }
        ++pos_;
        return cls;
    }

    uint32_t literal_char() {
        const uint32_t c = next();
        if (c != '\\') return c;
        const uint32_t e = next();
        switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': return e;
            case 'x': return hex(2);
            case 'u': return hex(4);
            case 'U': return hex(8);
            default: error_at(pos_ - 1, "unknown escape");
        }
    }

    void repetition(SpecItem& item) {
        const uint32_t c = peek();
        if (c != '*' && c != '+' && c != '?' && c != '{') return;
        const size_t at = pos_++;
        uint32_t min = 0, max = kUnbounded;
        if (c == '+') min = 1;
        else if (c == '?') max = 1;
        else if (c == '{') {
            skip_space();
            min = max = decimal(kMaxRepetition);
            skip_space();
            if (peek() == ',') {
                ++pos_;
                skip_space();
                max = peek() == '}' ? kUnbounded : decimal(kMaxRepetition);
                skip_space();
            }
            if (peek() != '}') error("expected '}' to close the repetition");
            ++pos_;
            if (max < min) error_at(at, "repetition has min > max");
        }
        skip_space();
        if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
            error("two repetition operators in a row (use parentheses)");
        if (item.min != 1 || item.max != 1) error_at(at, "two repetitions in a row");
        item.min = min;
        item.max = max;
    }

};

}  // namespace

GrammarSpec parse_gbnf_spec(std::string_view text) { return Parser(text).run(); }

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text) { return Grammar::compile(parse_gbnf_spec(text)); }

}  // namespace pagoda::grammar
