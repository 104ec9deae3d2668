// A cursor over the code points of a grammar or a regular expression, shared by the two
// hand-written parsers (GBNF, JSON-schema patterns): UTF-8 decoding, look-ahead, and the bounded
// decimal and hexadecimal numbers both read. Every problem goes to the parser's error_at(), which
// words it with its own prefix and position style and throws.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::grammar {

class TextCursor {
public:
    virtual ~TextCursor() = default;

protected:
    // Decodes `text`; invalid UTF-8 is an error at its code point. Call from the parser's constructor.
    void load(std::string_view text);

    [[noreturn]] virtual void error_at(size_t at, const std::string& what) const = 0;
    [[noreturn]] void error(const std::string& what) const {
        error_at(pos_, what);
        __builtin_unreachable();  // error_at throws; the attribute alone does not carry through a virtual call
    }

    bool at_end() const { return pos_ >= cps_.size(); }
    uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0; }
    uint32_t next();
    uint32_t decimal(uint32_t limit);  // digits, at least one, at most `limit`
    uint32_t hex(int digits);          // exactly `digits`, a Unicode scalar value

    std::vector<uint32_t> cps_;
    size_t pos_ = 0;
};

}  // namespace pagoda::grammar
