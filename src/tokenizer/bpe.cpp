#include "tokenizer/bpe.h"

#include <queue>

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
    int32_t rank;
    size_t length;  // merged length when queued; a mismatch later means the entry is stale
};

struct BigramOrder {  // std::priority_queue pops the "largest": lowest rank, then leftmost
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (vocab_.ignore_merges()) {
        if (int32_t id = vocab_.find(word); id != kNoToken) {
            out.push_back(id);
            return;
        }
    }
    const bool cacheable = word.size() <= kCacheableLength;
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        if (auto it = cache_.find(word); it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    size_t first = out.size();
    merge_word(word, out);
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        if (cache_.size() >= kCacheEntries) cache_.clear();  // crude but bounded; refills with hot words
        cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
    }
}

void BpeEncoder::merge_word(std::string_view word, std::vector<int32_t>& out) const {
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    for (size_t pos = 0; pos < word.size();) {
        size_t len = utf8_sequence_length(word, pos);
        int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, index + 1, pos, len});
        pos += len;
    }
    symbols.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[left];
        const Symbol& r = symbols[right];
        int32_t rank = vocab_.merge_rank(word.substr(l.start, l.length), word.substr(r.start, r.length));
        if (rank < 0) return;
        queue.push({left, right, rank, l.length + r.length});
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
        std::string_view piece = word.substr(symbols[i].start, symbols[i].length);
        if (int32_t id = vocab_.find(piece); id != kNoToken) {
            out.push_back(id);
            continue;
        }
        // A merge produced a string that is not a token (a malformed vocabulary): emit its characters.
        for (size_t pos = 0; pos < piece.size();) {
            size_t len = utf8_sequence_length(piece, pos);
            int32_t id = vocab_.find(piece.substr(pos, len));
            if (id == kNoToken) id = vocab_.unk();
            if (id != kNoToken) out.push_back(id);
            pos += len;
        }
    }
}

}  // namespace pagoda::tokenizer
