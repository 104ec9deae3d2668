// Greedy pairwise merging over a text split into UTF-8 characters, shared by SentencePiece (the
// best-scoring merged piece first) and byte-level BPE (the lowest merge rank first). The pieces
// form a doubly linked list; candidate pairs wait in a priority queue (highest priority first, ties
// to the leftmost pair) and stale entries — a side already merged away — are skipped when popped,
// so each merge costs O(log n) instead of a rescan of the word.
#pragma once
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

struct MergeSymbol {
    int prev;
    int next;
    size_t start;
    size_t length;  // 0 once merged into its left neighbour
};

// One symbol per UTF-8 character (or invalid byte) of `text`, linked in order. `text` must be non-empty.
inline void split_into_symbols(std::string_view text, std::vector<MergeSymbol>& symbols) {
    symbols.clear();
    for (size_t pos = 0; pos < text.size();) {
        size_t len = utf8_sequence_length(text, pos);
        int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, index + 1, pos, len});
        pos += len;
    }
    symbols.back().next = -1;
}

// Merges neighbours while some pair can merge. `priority_of(left, right)` returns the pair's
// priority (higher merges first) or nullopt when the two pieces do not merge.
template <class PriorityOf>
void merge_symbols(std::vector<MergeSymbol>& symbols, PriorityOf priority_of) {
    struct Candidate {
        int left, right;
        double priority;
        size_t length;  // merged length when queued; a mismatch later means the entry is stale
    };
    struct Order {  // std::priority_queue pops the "largest": highest priority, then leftmost
        bool operator()(const Candidate& a, const Candidate& b) const {
            return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, Order> queue;
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const MergeSymbol& l = symbols[size_t(left)];
        const MergeSymbol& r = symbols[size_t(right)];
        if (std::optional<double> p = priority_of(l, r)) queue.push({left, right, *p, l.length + r.length});
    };
    for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i - 1), static_cast<int>(i));
    while (!queue.empty()) {
        Candidate c = queue.top();
        queue.pop();
        MergeSymbol& left = symbols[size_t(c.left)];
        MergeSymbol& right = symbols[size_t(c.right)];
        if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[size_t(right.next)].prev = c.left;
        try_add(left.prev, c.left);
        try_add(c.left, left.next);
    }
}

}  // namespace pagoda::tokenizer
