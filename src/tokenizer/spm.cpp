#include "tokenizer/spm.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

struct Symbol {
    int prev;
    int next;
    size_t start;
    size_t length;  // 0 once merged into its left neighbour
};

struct Bigram {
    int left;
    int right;
    float score;
    size_t length;  // length of the merged text when queued; a mismatch later means it is stale
};

struct BigramOrder {  // std::priority_queue pops the "largest": highest score, then leftmost
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

namespace {

void encode_segment(const Vocab& vocab, std::string_view text, std::vector<Symbol>& symbols,
                    std::vector<int32_t>& out) {
    symbols.clear();
    for (size_t pos = 0; pos < text.size();) {
        size_t len = utf8_sequence_length(text, pos);
        int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, index + 1, pos, len});
        pos += len;
    }
    symbols.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        size_t length = symbols[left].length + symbols[right].length;
        int32_t id = vocab.find(text.substr(symbols[left].start, length));
        if (id == kNoToken) return;
        queue.push({left, right, vocab.score(id), length});
    };
    for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i - 1), static_cast<int>(i));

    while (!queue.empty()) {
        Bigram b = queue.top();
        queue.pop();
        Symbol& left = symbols[b.left];
        Symbol& right = symbols[b.right];
        if (left.length == 0 || right.length == 0 || left.length + right.length != b.length) continue;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = b.left;
        try_add(left.prev, b.left);
        try_add(b.left, left.next);
    }

    for (int i = 0; i >= 0; i = symbols[i].next) {
        std::string_view piece = text.substr(symbols[i].start, symbols[i].length);
        if (int32_t id = vocab.find(piece); id != kNoToken) {
            out.push_back(id);
            continue;
        }
        bool all_bytes = true;
        for (char c : piece) all_bytes = all_bytes && vocab.byte_token(static_cast<uint8_t>(c)) != kNoToken;
        if (all_bytes) {
            for (char c : piece) out.push_back(vocab.byte_token(static_cast<uint8_t>(c)));
        } else if (vocab.unk() != kNoToken) {
            out.push_back(vocab.unk());  // no byte fallback in this vocabulary: one unknown per character
        } else {
            fail("text contains '{}' which this vocabulary can neither encode nor mark unknown", piece);
        }
    }
}

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
    if (text.empty()) return;
    std::vector<Symbol> symbols;
    if (!vocab.spm_words_independent()) {
        encode_segment(vocab, text, symbols, out);
        return;
    }
    // Cut before every U+2581 that follows another character: no merge can cross such a cut.
    constexpr std::string_view space = "\xE2\x96\x81";
    size_t start = 0;
    for (size_t at = text.find(space, 1); at != std::string_view::npos; at = text.find(space, at + space.size())) {
        if (at >= space.size() && text.compare(at - space.size(), space.size(), space) == 0) continue;
        encode_segment(vocab, text.substr(start, at - start), symbols, out);
        start = at;
    }
    encode_segment(vocab, text.substr(start), symbols, out);
}

}  // namespace pagoda::tokenizer
