// Which tokens a grammar allows next. A mask walks the vocabulary's TokenTrie depth-first, carrying
// the matcher state one byte further per edge, and skips the whole subtree of a prefix the grammar
// rejects; a token is allowed when the state after its last byte is alive. The end tokens (end of
// generation, stop token ids) are allowed exactly when the grammar can end there. Masks are cached
// by matcher state (a JSON string's body, say, is the same state token after token), so repeated
// states cost a lookup, and the walk itself runs over a StateTable (memoised transitions). One
// TokenMasker serves the requests sharing a grammar, on one thread.
// With a token budget (the tokens the output may still have), a token is allowed only if the
// shortest completion after it fits in what remains (every token spells at least one byte), so an
// output that starts within budget always ends as a whole sentence instead of being cut by length.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/state_table.h"
#include "grammar/token_trie.h"

namespace pagoda::grammar {

class TokenMasker {
public:
    static constexpr int64_t kNoBudget = int64_t(1) << 40;
    TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                std::vector<int32_t> end_tokens, size_t cache_entries = 256, size_t table_states = 4096);

    // Bit i set: token i may come next (bits for ids beyond the trie's vocabulary are clear).
    // `budget`: tokens the output may still have, this one included (unlimited by default).
    const std::vector<uint64_t>& allowed(const MatchState& state, int64_t budget = kNoBudget);
    // Sets the logits of tokens not allowed to -infinity; returns how many remain.
    int64_t apply(const MatchState& state, float* logits, int64_t vocab_size, int64_t budget = kNoBudget);
    bool is_end_token(int32_t id) const;
    const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

    const TokenTrie& trie() const { return *trie_; }
    const Grammar& grammar() const { return *grammar_; }
    uint64_t cache_hits() const { return hits_; }
    uint64_t cache_misses() const { return misses_; }

private:
    struct Entry {
        MatchState state;
        std::vector<uint64_t> bits;
        // Shortest completion now, the tokens that keep it (`level`), and those that lengthen it
        // with the length after them, longest first: what a tight budget removes.
        uint32_t base = 0;
        std::vector<uint64_t> level;
        std::vector<std::pair<uint32_t, int32_t>> rising;
    };
    const Entry& entry(const MatchState& state);
    void compute(Entry& e);
    bool walk_table(Entry& e);  // false when the state table filled up
    void walk_direct(Entry& e);
    void add_token(Entry& e, int32_t id, uint32_t after);

    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenTrie> trie_;
    std::vector<int32_t> end_tokens_;
    size_t capacity_;
    std::list<Entry> lru_;  // most recent first
    std::unordered_map<size_t, std::vector<std::list<Entry>::iterator>> index_;
    StateTable table_;
    std::vector<uint32_t> walk_ids_;  // the state at each trie depth (table walk)
    std::vector<MatchState> walk_;    // the same, computed directly (fallback)
    std::vector<uint64_t> tight_;   // a budget-limited copy of an entry's bits
    uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace pagoda::grammar
