// Matcher states interned and their byte transitions memoised: a DFA over the grammar's pushdown
// states, built lazily as mask walks discover them. A mask walk visits every live node of the
// vocabulary trie, and most nodes repeat a (state, byte) pair some other node already computed
// (inside a JSON string every plain character leads to the same few states), so with the table a
// trie edge costs an array lookup instead of a matcher step. Bounded: past `max_states` states,
// next() reports `kFull` and the caller clears the table.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace pagoda::grammar {

class StateTable {
public:
    static constexpr uint32_t kDead = 0xFFFFFFFF;  // the byte is rejected
    static constexpr uint32_t kFull = 0xFFFFFFFE;  // no room for a new state

    explicit StateTable(std::shared_ptr<const Grammar> grammar, size_t max_states = 4096);

    uint32_t intern(const MatchState& state);  // kFull when the table is full
    uint32_t next(uint32_t id, uint8_t byte);  // kDead, kFull, or the state after `byte`
    uint32_t completion(uint32_t id) const { return completion_[id]; }  // completion_bytes() of it
    const MatchState& state(uint32_t id) const { return states_[id]; }
    size_t size() const { return states_.size(); }
    void clear();

private:
    static constexpr uint32_t kUnknown = 0xFFFFFFFD;
    std::shared_ptr<const Grammar> grammar_;
    size_t max_states_;
    std::vector<MatchState> states_;
    std::vector<uint32_t> completion_;
    std::vector<uint32_t> next_;  // 256 entries per state
    std::unordered_map<size_t, std::vector<uint32_t>> by_hash_;
    MatchState scratch_;
};

}  // namespace pagoda::grammar
