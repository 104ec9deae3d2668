// The incremental recogniser of a compiled Grammar: a pushdown state advanced one byte at a time.
// The state is a set of stacks of grammar positions (the top of each is the character class that
// must match next, the entries below are where to continue when the current rule ends), deduplicated
// after each step, plus the bits of a UTF-8 character still being read. A byte that no stack can
// take (or invalid UTF-8) is rejected and leaves the state as it was; a character half read is
// kept with only the stacks whose class intersects the code points it can still become (none: rejected).
// Bounds: a stack deeper than kMaxStackDepth is dropped (nesting beyond it cannot be produced) and
// more than kMaxStacks live stacks is a pagoda::Error (a grammar too ambiguous to follow).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace pagoda::grammar {

inline constexpr size_t kMaxStackDepth = 1024;
inline constexpr size_t kMaxStacks = 1024;

struct MatchState {
    std::vector<uint32_t> cells;  // the stacks, bottom to top, one after another
    std::vector<uint32_t> ends;   // end offset in `cells` of each stack
    bool complete = false;        // the characters so far form a whole sentence of the grammar
    uint32_t partial = 0;         // bits of a UTF-8 character not yet complete
    uint8_t need = 0;             // its continuation bytes still to come
    uint8_t length = 0;           // its total length in bytes

    bool can_end() const { return complete && need == 0; }
    bool can_continue() const { return !ends.empty(); }
    bool operator==(const MatchState& o) const = default;
    size_t hash() const;
};

// One step: `out` = `in` after `byte`; false (out unspecified) when the byte is rejected.
bool advance_byte(const Grammar& grammar, const MatchState& in, uint8_t byte, MatchState& out);

// The state before any input.
MatchState initial_state(const Grammar& grammar);

// The fewest bytes that complete a sentence from `state` (0 when it can end; Grammar::kNever when
// no completion exists).
uint32_t completion_bytes(const Grammar& grammar, const MatchState& state);

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> grammar);

    // Feeds bytes; false (state unchanged) when some byte is rejected.
    bool accept(std::string_view bytes);
    bool can_end() const { return state_.can_end(); }
    bool can_continue() const { return state_.can_continue(); }
    const MatchState& state() const { return state_; }
    const Grammar& grammar() const { return *grammar_; }

private:
    std::shared_ptr<const Grammar> grammar_;
    MatchState state_, scratch_;
};

}  // namespace pagoda::grammar
