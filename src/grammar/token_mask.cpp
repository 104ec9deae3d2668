#include "grammar/token_mask.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "core/error.h"

namespace pagoda::grammar {

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                         std::vector<int32_t> end_tokens, size_t cache_entries)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), end_tokens_(std::move(end_tokens)),
      capacity_(std::max<size_t>(1, cache_entries)) {
    if (!grammar_ || !trie_) fail("token masker: needs a grammar and a token trie");
    std::sort(end_tokens_.begin(), end_tokens_.end());
    end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
}

bool TokenMasker::is_end_token(int32_t id) const {
    return std::binary_search(end_tokens_.begin(), end_tokens_.end(), id);
}

void TokenMasker::compute(const MatchState& state, std::vector<uint64_t>& bits) {
    const int32_t n = trie_->n_tokens();
    bits.assign(size_t(n + 63) / 64, 0);
    auto set = [&](int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); };
    if (state.can_end())
        for (int32_t id : end_tokens_)
            if (id >= 0 && id < n) set(id);
    const auto& nodes = trie_->nodes();
    if (walk_.empty()) walk_.resize(1);
    walk_[0] = state;
    for (uint32_t i = 1; i < nodes.size();) {
        const TokenTrie::Node& node = nodes[i];
        if (walk_.size() <= node.depth) walk_.resize(size_t(node.depth) + 1);
        if (!advance_byte(*grammar_, walk_[node.depth - 1], node.byte, walk_[node.depth])) {
            i = node.skip;
            continue;
        }
        for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) set(trie_->token(t));
        ++i;
    }
}

const std::vector<uint64_t>& TokenMasker::allowed(const MatchState& state) {
    const size_t h = state.hash();
    auto& bucket = index_[h];
    for (auto it : bucket)
        if (it->state == state) {
            lru_.splice(lru_.begin(), lru_, it);
            ++hits_;
            return it->bits;
        }
    ++misses_;
    if (lru_.size() >= capacity_) {
        auto last = std::prev(lru_.end());
        auto& old = index_[last->state.hash()];
        old.erase(std::find(old.begin(), old.end(), last));
        if (old.empty()) index_.erase(last->state.hash());
        lru_.pop_back();
    }
    lru_.push_front({state, {}});
    compute(state, lru_.front().bits);
    index_[h].push_back(lru_.begin());
    return lru_.front().bits;
}

int64_t TokenMasker::apply(const MatchState& state, float* logits, int64_t vocab) {
    const std::vector<uint64_t>& bits = allowed(state);
    int64_t kept = 0;
    const int64_t n = std::min<int64_t>(vocab, trie_->n_tokens());
    for (int64_t i = 0; i < n; ++i) {
        if (bits[size_t(i) >> 6] >> (i & 63) & 1) ++kept;
        else logits[i] = -std::numeric_limits<float>::infinity();
    }
    for (int64_t i = n; i < vocab; ++i) logits[i] = -std::numeric_limits<float>::infinity();
    return kept;
}

}  // namespace pagoda::grammar
