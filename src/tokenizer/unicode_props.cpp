#include "tokenizer/unicode_props.h"

#include <algorithm>

#include "tokenizer/unicode_props_tables.h"

namespace pagoda::tokenizer {

namespace {

using namespace unicode;

uint8_t class_of(char32_t cp) {
    if (cp > 0x10FFFF) return 3;
    const ClassRange* end = kClassRanges + kClassRangeCount;
    const ClassRange* it = std::upper_bound(kClassRanges, end, cp, [](char32_t c, const ClassRange& r) { return c < r.lo; });
    if (it == kClassRanges) return 0;
    --it;
    return cp <= it->hi ? it->cls : 0;
}

}  // namespace

bool is_white_space(char32_t cp) {
    const CodeRange* end = kWhiteSpace + kWhiteSpaceCount;
    const CodeRange* it = std::upper_bound(kWhiteSpace, end, cp, [](char32_t c, const CodeRange& r) { return c < r.lo; });
    return it != kWhiteSpace && cp <= (it - 1)->hi;
}

bool is_nonspacing_mark(char32_t cp) { return cp >= 0x300 && class_of(cp) == 1; }
bool is_punctuation(char32_t cp) { return class_of(cp) == 2; }
bool is_other(char32_t cp) { return class_of(cp) == 3; }

bool is_bert_punctuation(char32_t cp) {
    const bool ascii_punct = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                             (cp >= 0x7B && cp <= 0x7E);
    return ascii_punct || is_punctuation(cp);
}

bool is_cjk_ideograph(char32_t cp) {
    // Hugging Face's list (0x2B920 rather than the block's 0x2B820 start is theirs, kept for agreement).
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_lowercase(std::vector<char32_t>& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        return;
    }
    const LowercaseMapping* end = kLowercase + kLowercaseCount;
    const LowercaseMapping* it =
        std::lower_bound(kLowercase, end, cp, [](const LowercaseMapping& m, char32_t c) { return m.cp < c; });
    if (it == end || it->cp != cp) {
        out.push_back(cp);
        return;
    }
    out.push_back(it->first);
    if (it->second) out.push_back(it->second);
}

}  // namespace pagoda::tokenizer
