#include "grammar/token_mask.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "core/error.h"

namespace pagoda::grammar {

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                         std::vector<int32_t> end_tokens, size_t cache_entries, size_t table_states)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), end_tokens_(std::move(end_tokens)),
      capacity_(std::max<size_t>(1, cache_entries)), table_(grammar_, table_states) {
    if (!grammar_ || !trie_) fail("token masker: needs a grammar and a token trie");
    std::sort(end_tokens_.begin(), end_tokens_.end());
    end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
}

bool TokenMasker::is_end_token(int32_t id) const {
    return std::binary_search(end_tokens_.begin(), end_tokens_.end(), id);
}

void TokenMasker::add_token(Entry& e, int32_t id, uint32_t after) {
    const uint64_t bit = uint64_t(1) << (id & 63);
    e.bits[size_t(id) >> 6] |= bit;
    if (after == e.base) e.level[size_t(id) >> 6] |= bit;
    else if (after > e.base) e.rising.push_back({after, id});
}

bool TokenMasker::walk_table(Entry& e) {
    const auto& nodes = trie_->nodes();
    const uint32_t root = table_.intern(e.state);
    if (root == StateTable::kFull) return false;
    walk_ids_.assign(1, root);
    for (uint32_t i = 1; i < nodes.size();) {
        const TokenTrie::Node& node = nodes[i];
        if (walk_ids_.size() <= node.depth) walk_ids_.resize(size_t(node.depth) + 1);
        const uint32_t id = table_.next(walk_ids_[node.depth - 1], node.byte);
        if (id == StateTable::kFull) return false;
        if (id == StateTable::kDead) {
            i = node.skip;
            continue;
        }
        walk_ids_[node.depth] = id;
        for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) add_token(e, trie_->token(t), table_.completion(id));
        ++i;
    }
    return true;
}

void TokenMasker::walk_direct(Entry& e) {
    const auto& nodes = trie_->nodes();
    walk_.resize(1);
    walk_[0] = e.state;
    for (uint32_t i = 1; i < nodes.size();) {
        const TokenTrie::Node& node = nodes[i];
        if (walk_.size() <= node.depth) walk_.resize(size_t(node.depth) + 1);
        if (!advance_byte(*grammar_, walk_[node.depth - 1], node.byte, walk_[node.depth])) {
            i = node.skip;
            continue;
        }
        if (node.tokens_begin != node.tokens_end) {
            const uint32_t after = completion_bytes(*grammar_, walk_[node.depth]);
            for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) add_token(e, trie_->token(t), after);
        }
        ++i;
    }
}

void TokenMasker::compute(Entry& e) {
    const int32_t n = trie_->n_tokens();
    const size_t words = size_t(n + 63) / 64;
    auto reset = [&] {
        e.bits.assign(words, 0);
        e.level.assign(words, 0);
        e.rising.clear();
    };
    reset();
    e.base = completion_bytes(*grammar_, e.state);
    if (!walk_table(e)) {
        // The table filled up: start it afresh; a walk that alone overflows it goes direct.
        table_.clear();
        reset();
        if (!walk_table(e)) {
            table_.clear();
            reset();
            walk_direct(e);
        }
    }
    // An end token (a stop token id may spell text) ends the output: allowed only where it may end.
    for (int32_t id : end_tokens_) {
        if (id < 0 || id >= n) continue;
        const uint64_t bit = uint64_t(1) << (id & 63);
        e.bits[size_t(id) >> 6] &= ~bit;
        e.level[size_t(id) >> 6] &= ~bit;
    }
    std::erase_if(e.rising, [&](const auto& r) { return is_end_token(r.second); });
    if (e.state.can_end())
        for (int32_t id : end_tokens_)
            if (id >= 0 && id < n) add_token(e, id, 0);
    std::sort(e.rising.begin(), e.rising.end(), std::greater<>());
}

const TokenMasker::Entry& TokenMasker::entry(const MatchState& state) {
    const size_t h = state.hash();
    for (auto it : index_[h])
        if (it->state == state) {
            lru_.splice(lru_.begin(), lru_, it);
            ++hits_;
            return *it;
        }
    ++misses_;
    if (lru_.size() >= capacity_) {
        auto last = std::prev(lru_.end());
        const size_t old_hash = last->state.hash();
        auto& old = index_[old_hash];
        old.erase(std::find(old.begin(), old.end(), last));
        if (old.empty()) index_.erase(old_hash);
        lru_.pop_back();
    }
    lru_.push_front({state, {}, 0, {}, {}});
    compute(lru_.front());
    index_[h].push_back(lru_.begin());
    return lru_.front();
}

const std::vector<uint64_t>& TokenMasker::allowed(const MatchState& state, int64_t budget) {
    const Entry& e = entry(state);
    const int64_t left = budget - 1;  // tokens after this one
    const bool fits_all = e.rising.empty() ? left >= int64_t(e.base) : left >= int64_t(e.rising.front().first);
    // Out of budget already (the output started with too little): nothing can save it, no limit.
    if (fits_all || left + 1 < int64_t(e.base)) return e.bits;
    tight_ = e.bits;
    if (left < int64_t(e.base))
        for (size_t w = 0; w < tight_.size(); ++w) tight_[w] &= ~e.level[w];
    for (const auto& [after, id] : e.rising) {
        if (int64_t(after) <= left) break;
        tight_[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63));
    }
    return tight_;
}

int64_t TokenMasker::apply(const MatchState& state, float* logits, int64_t vocab, int64_t budget) {
    const std::vector<uint64_t>& bits = allowed(state, budget);
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
