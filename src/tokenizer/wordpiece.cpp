#include "tokenizer/wordpiece.h"

#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

void wordpiece_encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) {
    std::vector<size_t> bounds;  // character boundaries, 0 and word.size() included
    for (size_t pos = 0; pos < word.size(); pos += utf8_sequence_length(word, pos)) bounds.push_back(pos);
    bounds.push_back(word.size());
    if (bounds.size() - 1 > vocab.max_input_chars_per_word()) {
        out.push_back(vocab.unk());
        return;
    }
    const size_t first = out.size();
    std::string key;
    for (size_t start = 0; start + 1 < bounds.size();) {
        const std::string& prefix = start == 0 ? vocab.word_prefix() : vocab.continuing_prefix();
        int32_t found = kNoToken;
        size_t end = bounds.size() - 1;
        for (; end > start; --end) {
            key.assign(prefix);
            key.append(word.substr(bounds[start], bounds[end] - bounds[start]));
            found = vocab.find(key);
            if (found != kNoToken) break;
        }
        if (found == kNoToken) {  // no piece starts here: the whole word is unknown
            out.resize(first);
            out.push_back(vocab.unk());
            return;
        }
        out.push_back(found);
        start = end;
    }
}

}  // namespace pagoda::tokenizer
