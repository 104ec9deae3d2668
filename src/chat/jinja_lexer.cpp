#include "chat/jinja_lexer.h"

#include <fmt/format.h>

#include "chat/jinja_text.h"
#include "core/error.h"

namespace pagoda::chat::jinja {

std::string describe_position(std::string_view source, std::size_t offset) {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
        if (source[i] == '\n') {
            ++line;
            col = 1;
        } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
            ++col;
        }
    }
    return fmt::format("line {}, column {}", line, col);
}

namespace {

// Python's \s for the ASCII range (what matters for template syntax).
bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
public:
    explicit Lexer(std::string source) { out_.source = std::move(source); }

    LexedTemplate run() {
        const std::string& s = out_.source;
        while (pos_ < s.size()) {
            const std::size_t tag = find_tag(pos_);
            if (tag == std::string::npos) {
                emit_text(s.substr(pos_), pos_);
                pos_ = s.size();
                break;
            }
            const char kind = s[tag + 1];
            const char sign = tag + 2 < s.size() && (s[tag + 2] == '-' || s[tag + 2] == '+') ? s[tag + 2] : '\0';
            std::string text = s.substr(pos_, tag - pos_);
            if (sign == '-') {
                std::size_t end = text.size();
                while (end > 0 && is_ws(text[end - 1])) --end;
                text.resize(end);
            } else if (sign != '+' && kind != '{') {
                // lstrip_blocks: drop the indentation before a block/comment tag on its own line.
                const std::size_t nl = text.rfind('\n');
                const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
                if (l_pos > 0 || line_starting_) {
                    bool blank = l_pos < text.size();
                    for (std::size_t i = l_pos; i < text.size(); ++i) blank = blank && is_ws(text[i]);
                    if (blank) text.resize(l_pos);
                }
            }
            emit_text(std::move(text), pos_);
            pos_ = tag + 2 + (sign ? 1 : 0);
            if (kind == '#') lex_comment(tag);
            else if (kind == '%' && try_raw(tag)) continue;
            else lex_tag(kind == '{' ? TokenType::variable_begin : TokenType::block_begin, tag);
        }
        out_.tokens.push_back(Token{TokenType::eof, "", s.size()});
        return std::move(out_);
    }

private:
    LexedTemplate out_;
    std::size_t pos_ = 0;
    bool line_starting_ = true;

    [[noreturn]] void error(std::size_t offset, const std::string& what) const {
        fail("chat template syntax error at {}: {}", describe_position(out_.source, offset), what);
    }

    std::size_t find_tag(std::size_t from) const {
        const std::string& s = out_.source;
        for (std::size_t i = s.find('{', from); i != std::string::npos; i = s.find('{', i + 1)) {
            if (i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
        }
        return std::string::npos;
    }

    void emit_text(std::string text, std::size_t offset) {
        if (text.empty()) return;
        if (!out_.tokens.empty() && out_.tokens.back().type == TokenType::text) {
            out_.tokens.back().value += text;
            return;
        }
        out_.tokens.push_back(Token{TokenType::text, std::move(text), offset});
    }

    // After an end delimiter: `-` strips all following whitespace; plain block/comment ends eat
    // one newline (trim_blocks). Records whether the consumed text ended a line (lstrip rule).
    void finish_tag(char sign, bool trim_newline) {
        const std::string& s = out_.source;
        bool ended_newline = false;
        if (sign == '-') {
            while (pos_ < s.size() && is_ws(s[pos_])) {
                ended_newline = s[pos_] == '\n';
                ++pos_;
            }
        } else if (sign != '+' && trim_newline && pos_ < s.size() && s[pos_] == '\n') {
            ++pos_;
            ended_newline = true;
        }
        line_starting_ = ended_newline;
    }

    void lex_comment(std::size_t start) {
        const std::string& s = out_.source;
        const std::size_t end = s.find("#}", pos_);
        if (end == std::string::npos) error(start, "missing end of comment tag '#}'");
        char sign = '\0';
        if (end > pos_ && (s[end - 1] == '-' || s[end - 1] == '+')) sign = s[end - 1];
        pos_ = end + 2;
        finish_tag(sign, true);
    }

    // `{% raw %}` … `{% endraw %}`: the body is text, untouched except for the whitespace control
    // on the endraw tag.
    bool try_raw(std::size_t start) {
        const std::string& s = out_.source;
        std::size_t p = pos_;
        while (p < s.size() && is_ws(s[p])) ++p;
        if (s.compare(p, 3, "raw") != 0 || (p + 3 < s.size() && is_name_char(s[p + 3]))) return false;
        p += 3;
        while (p < s.size() && is_ws(s[p])) ++p;
        char sign = '\0';
        if (p < s.size() && (s[p] == '-' || s[p] == '+')) sign = s[p++];
        if (s.compare(p, 2, "%}") != 0) error(p, "expected '%}' after 'raw'");
        pos_ = p + 2;
        finish_tag(sign == '+' ? '+' : sign, true);
        // Find `{%[-+]? endraw [-+]?%}`.
        for (std::size_t q = s.find("{%", pos_); q != std::string::npos; q = s.find("{%", q + 1)) {
            std::size_t r = q + 2;
            const char open_sign = r < s.size() && (s[r] == '-' || s[r] == '+') ? s[r] : '\0';
            if (open_sign) ++r;
            while (r < s.size() && is_ws(s[r])) ++r;
            if (s.compare(r, 6, "endraw") != 0) continue;
            r += 6;
            while (r < s.size() && is_ws(s[r])) ++r;
            char close_sign = '\0';
            if (r < s.size() && (s[r] == '-' || s[r] == '+')) close_sign = s[r++];
            if (s.compare(r, 2, "%}") != 0) continue;
            std::string body = s.substr(pos_, q - pos_);
            if (open_sign == '-') {
                while (!body.empty() && is_ws(body.back())) body.pop_back();
            } else if (open_sign != '+') {
                const std::size_t nl = body.rfind('\n');
                const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
                if (l_pos > 0 || line_starting_) {
                    bool blank = l_pos < body.size();
                    for (std::size_t i = l_pos; i < body.size(); ++i) blank = blank && is_ws(body[i]);
                    if (blank) body.resize(l_pos);
                }
            }
            emit_text(std::move(body), pos_);
            pos_ = r + 2;
            finish_tag(close_sign, true);
            return true;
        }
        error(start, "missing '{% endraw %}'");
    }

    void lex_tag(TokenType begin, std::size_t start) {
        const std::string& s = out_.source;
        const bool is_block = begin == TokenType::block_begin;
        out_.tokens.push_back(Token{begin, "", start});
        std::vector<char> balance;
        while (true) {
            while (pos_ < s.size() && is_ws(s[pos_])) ++pos_;
            if (pos_ >= s.size()) error(start, is_block ? "unclosed '{%' tag" : "unclosed '{{' tag");
            if (balance.empty()) {
                const char* close = is_block ? "%}" : "}}";
                char sign = '\0';
                std::size_t p = pos_;
                if ((s[p] == '-' || (is_block && s[p] == '+')) && s.compare(p + 1, 2, close) == 0) sign = s[p++];
                if (s.compare(p, 2, close) == 0) {
                    out_.tokens.push_back(Token{is_block ? TokenType::block_end : TokenType::variable_end, "", pos_});
                    pos_ = p + 2;
                    finish_tag(sign, is_block);
                    return;
                }
            }
            lex_expression_token(balance);
        }
    }

    void lex_expression_token(std::vector<char>& balance) {
        const std::string& s = out_.source;
        const std::size_t start = pos_;
        const char c = s[pos_];
        if (is_name_start(c)) {
            while (pos_ < s.size() && is_name_char(s[pos_])) ++pos_;
            out_.tokens.push_back(Token{TokenType::name, s.substr(start, pos_ - start), start});
            return;
        }
        if (is_digit(c)) {
            lex_number();
            return;
        }
        if (c == '\'' || c == '"') {
            lex_string();
            return;
        }
        static const char* const two_char[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : two_char) {
            if (s.compare(pos_, 2, op) == 0) {
                out_.tokens.push_back(Token{TokenType::op, op, start});
                pos_ += 2;
                return;
            }
        }
        static const std::string single = "+-/*%~[](){}><=.:|,;";
        if (single.find(c) == std::string::npos) error(start, fmt::format("unexpected character '{}'", c));
        if (c == '(' || c == '[' || c == '{') {
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) error(start, fmt::format("unexpected '{}'", c));
            if (balance.back() != c) error(start, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
            balance.pop_back();
        }
        out_.tokens.push_back(Token{TokenType::op, std::string(1, c), start});
        ++pos_;
    }

    void lex_number() {
        const std::string& s = out_.source;
        const std::size_t start = pos_;
        auto digits = [&] {
            while (pos_ < s.size() && (is_digit(s[pos_]) || (s[pos_] == '_' && pos_ + 1 < s.size() && is_digit(s[pos_ + 1]))))
                ++pos_;
        };
        digits();
        bool is_float = false;
        // After a '.', digits are an attribute index (`foo.0.1`), never a float.
        const bool after_dot = !out_.tokens.empty() && out_.tokens.back().type == TokenType::op &&
                               out_.tokens.back().value == "." && out_.tokens.back().offset + 1 == start;
        if (!after_dot && pos_ + 1 < s.size() && s[pos_] == '.' && is_digit(s[pos_ + 1])) {
            ++pos_;
            digits();
            is_float = true;
        }
        if (!after_dot && pos_ < s.size() && (s[pos_] == 'e' || s[pos_] == 'E')) {
            std::size_t p = pos_ + 1;
            if (p < s.size() && (s[p] == '+' || s[p] == '-')) ++p;
            if (p < s.size() && is_digit(s[p])) {
                pos_ = p;
                digits();
                is_float = true;
            }
        }
        std::string spelled;
        for (std::size_t i = start; i < pos_; ++i) if (s[i] != '_') spelled.push_back(s[i]);
        out_.tokens.push_back(Token{is_float ? TokenType::floating : TokenType::integer, spelled, start});
    }

    static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // Python string-literal escapes (Jinja decodes literals with "unicode-escape").
    void lex_string() {
        const std::string& s = out_.source;
        const std::size_t start = pos_;
        const char quote = s[pos_++];
        std::string value;
        while (true) {
            if (pos_ >= s.size()) error(start, "unterminated string literal");
            const char c = s[pos_];
            if (c == quote) {
                ++pos_;
                break;
            }
            if (c != '\\') {
                value.push_back(c);
                ++pos_;
                continue;
            }
            if (pos_ + 1 >= s.size()) error(start, "unterminated string literal");
            const char e = s[pos_ + 1];
            pos_ += 2;
            switch (e) {
                case '\n': break;
                case '\\': value.push_back('\\'); break;
                case '\'': value.push_back('\''); break;
                case '"': value.push_back('"'); break;
                case 'a': value.push_back('\a'); break;
                case 'b': value.push_back('\b'); break;
                case 'f': value.push_back('\f'); break;
                case 'n': value.push_back('\n'); break;
                case 'r': value.push_back('\r'); break;
                case 't': value.push_back('\t'); break;
                case 'v': value.push_back('\v'); break;
                case 'x': case 'u': case 'U': {
                    const int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    char32_t cp = 0;
                    for (int k = 0; k < len; ++k) {
                        const int h = pos_ < s.size() ? hex_value(s[pos_]) : -1;
                        if (h < 0) error(pos_, fmt::format("truncated \\{} escape in string literal", e));
                        cp = cp * 16 + static_cast<char32_t>(h);
                        ++pos_;
                    }
                    if (cp > 0x10FFFF) error(pos_, "illegal Unicode character in string literal");
                    utf8_append(value, cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t cp = static_cast<char32_t>(e - '0');
                        for (int k = 0; k < 2 && pos_ < s.size() && s[pos_] >= '0' && s[pos_] <= '7'; ++k)
                            cp = cp * 8 + static_cast<char32_t>(s[pos_++] - '0');
                        utf8_append(value, cp);
                    } else if (e == 'N') {
                        error(pos_, "\\N{...} escapes are not supported in chat templates");
                    } else {
                        value.push_back('\\');
                        value.push_back(e);
                    }
            }
        }
        out_.tokens.push_back(Token{TokenType::string, std::move(value), start});
    }
};

std::string normalise_newlines(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out.push_back(source[i]);
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
    return out;
}

}  // namespace

LexedTemplate lex_template(std::string_view source) { return Lexer(normalise_newlines(source)).run(); }

}  // namespace pagoda::chat::jinja
