#include "tokenizer/bert_normalizer.h"

#include "tokenizer/unicode_nfc.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

std::vector<std::string> bert_words(std::string_view text, const BertOptions& options) {
    std::vector<char32_t> cps;
    cps.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const DecodedChar c = utf8_decode(text, pos);
        char32_t cp = c.codepoint == kInvalidCodepoint ? char32_t(0xFFFD) : c.codepoint;
        pos += c.length;
        if (options.clean_text) {
            const bool kept_whitespace = cp == '\t' || cp == '\n' || cp == '\r';
            if (cp == 0 || cp == 0xFFFD || (!kept_whitespace && is_other(cp))) continue;
            if (is_white_space(cp)) cp = ' ';
        }
        if (options.handle_chinese_chars && is_cjk_ideograph(cp)) {
            cps.push_back(' ');
            cps.push_back(cp);
            cps.push_back(' ');
            continue;
        }
        cps.push_back(cp);
    }
    if (options.strip_accents) {
        std::vector<char32_t> decomposed = nfd(cps);
        cps.clear();
        for (char32_t cp : decomposed)
            if (!is_nonspacing_mark(cp)) cps.push_back(cp);
    }
    if (options.lowercase) {
        std::vector<char32_t> lowered;
        lowered.reserve(cps.size());
        for (char32_t cp : cps) append_lowercase(lowered, cp);
        cps.swap(lowered);
    }
    std::vector<std::string> words;
    std::string word;
    auto finish = [&] {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (char32_t cp : cps) {
        if (is_white_space(cp)) {
            finish();
        } else if (is_bert_punctuation(cp)) {
            finish();
            utf8_append(word, cp);
            finish();
        } else {
            utf8_append(word, cp);
        }
    }
    finish();
    return words;
}

}  // namespace pagoda::tokenizer
