#include "grammar/state_table.h"

namespace pagoda::grammar {

StateTable::StateTable(std::shared_ptr<const Grammar> grammar, size_t max_states)
    : grammar_(std::move(grammar)), max_states_(max_states) {}

void StateTable::clear() {
    states_.clear();
    completion_.clear();
    next_.clear();
    by_hash_.clear();
}

uint32_t StateTable::intern(const MatchState& s) {
    auto& bucket = by_hash_[s.hash()];
    for (uint32_t id : bucket)
        if (states_[id] == s) return id;
    if (states_.size() >= max_states_) return kFull;
    const uint32_t id = uint32_t(states_.size());
    bucket.push_back(id);
    states_.push_back(s);
    completion_.push_back(completion_bytes(*grammar_, s));
    next_.resize(next_.size() + 256, kUnknown);
    return id;
}

uint32_t StateTable::next(uint32_t id, uint8_t byte) {
    const size_t slot = size_t(id) * 256 + byte;
    if (next_[slot] != kUnknown) return next_[slot];
    if (!advance_byte(*grammar_, states_[id], byte, scratch_)) return next_[slot] = kDead;
    const uint32_t to = intern(scratch_);
    if (to != kFull) next_[slot] = to;  // intern() may have grown next_: index it afresh
    return to;
}

}  // namespace pagoda::grammar
