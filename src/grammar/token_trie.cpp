#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::grammar {

namespace {
// A token longer than this cannot be represented by Node::depth; no real vocabulary comes close.
inline constexpr size_t kMaxPiece = 60000;
}

TokenTrie::TokenTrie(const tokenizer::Tokenizer& tok) {
    pieces_.resize(size_t(tok.n_vocab()));
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
        if (!tok.vocab().is_control(id)) pieces_[size_t(id)] = tok.token_to_piece(id, false);
    build();
}

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : pieces_(pieces) { build(); }

void TokenTrie::build() {
    n_tokens_ = int32_t(pieces_.size());
    std::vector<int32_t> order;
    for (int32_t id = 0; id < n_tokens_; ++id) {
        if (pieces_[size_t(id)].size() > kMaxPiece) fail("token trie: token {} is {} bytes long", id, pieces_[size_t(id)].size());
        if (!pieces_[size_t(id)].empty()) order.push_back(id);
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return pieces_[size_t(a)] < pieces_[size_t(b)] || (pieces_[size_t(a)] == pieces_[size_t(b)] && a < b);
    });
    // Sorted pieces visit the trie in depth-first order: each piece opens the nodes beyond its
    // common prefix with the previous one, and closes (sets `skip` of) the nodes beyond that prefix.
    nodes_.push_back({});
    std::vector<uint32_t> open{0};  // open[d]: the node at depth d on the current path
    std::string prev;
    for (int32_t id : order) {
        const std::string& p = pieces_[size_t(id)];
        size_t common = 0;
        while (common < prev.size() && common < p.size() && prev[common] == p[common]) ++common;
        while (open.size() > common + 1) {
            nodes_[open.back()].skip = uint32_t(nodes_.size());
            open.pop_back();
        }
        for (size_t d = common; d < p.size(); ++d) {
            Node n;
            n.depth = uint16_t(d + 1);
            n.byte = uint8_t(p[d]);
            open.push_back(uint32_t(nodes_.size()));
            nodes_.push_back(n);
        }
        Node& end = nodes_[open.back()];
        if (end.tokens_begin == end.tokens_end) end.tokens_begin = end.tokens_end = uint32_t(tokens_.size());
        tokens_.push_back(id);
        ++end.tokens_end;
        prev = p;
    }
    for (uint32_t i : open) nodes_[i].skip = uint32_t(nodes_.size());
}

}  // namespace pagoda::grammar
