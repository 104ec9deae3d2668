#include "tokenizer/special_tokens.h"

namespace pagoda::tokenizer {

namespace {
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) : vocab_(vocab) {
    for (int32_t id : vocab.literal_tokens())  // already longest first
        by_first_byte_[static_cast<uint8_t>(vocab.text(id)[0])].push_back(id);
}

std::vector<Fragment> SpecialTokenMatcher::split(std::string_view text, bool parse_special) const {
    std::vector<Fragment> out;
    size_t text_start = 0;  // start of the pending plain text
    bool strip_leading = false;
    auto flush_text = [&](size_t end, bool strip_trailing) {
        size_t begin = text_start;
        if (strip_leading)
            while (begin < end && is_ascii_space(text[begin])) ++begin;
        if (strip_trailing)
            while (end > begin && is_ascii_space(text[end - 1])) --end;
        if (end > begin) out.push_back({kNoToken, text.substr(begin, end - begin)});
    };
    for (size_t pos = 0; pos < text.size();) {
        int32_t match = kNoToken;
        for (int32_t id : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
            if (!parse_special && vocab_.token_type(id) != TokenType::user_defined) continue;
            if (text.compare(pos, vocab_.text(id).size(), vocab_.text(id)) == 0) {
                match = id;
                break;
            }
        }
        if (match == kNoToken) {
            ++pos;
            continue;
        }
        flush_text(pos, vocab_.lstrip(match));
        out.push_back({match, {}});
        pos += vocab_.text(match).size();
        text_start = pos;
        strip_leading = vocab_.rstrip(match);
    }
    flush_text(text.size(), false);
    return out;
}

}  // namespace pagoda::tokenizer
