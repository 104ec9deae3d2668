#include "grammar/text_cursor.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace pagoda::grammar {

void TextCursor::load(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        auto d = tokenizer::utf8_decode(text, i);
        if (d.codepoint == tokenizer::kInvalidCodepoint) error_at(cps_.size(), "invalid UTF-8");
        cps_.push_back(uint32_t(d.codepoint));
        i += d.length;
    }
}

uint32_t TextCursor::next() {
    if (at_end()) error("unexpected end");
    return cps_[pos_++];
}

uint32_t TextCursor::decimal(uint32_t limit) {
    if (!(peek() >= '0' && peek() <= '9')) error("expected a number");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (next() - '0');
        if (v > limit) error(fmt::format("repetition count is above the limit of {}", limit));
    }
    return uint32_t(v);
}

uint32_t TextCursor::hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
        const uint32_t c = next();
        uint32_t d = 0;
        if (c >= '0' && c <= '9') d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
        else error_at(pos_ - 1, "expected a hexadecimal digit");
        v = v * 16 + d;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error_at(pos_ - 1, "escape is not a Unicode scalar value");
    return v;
}

}  // namespace pagoda::grammar
