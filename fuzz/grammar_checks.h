// What gbnf_fuzz and json_schema_fuzz do with a compiled grammar: feed input bytes to the matcher
// one at a time and, at the start and every few accepted bytes, compute the token mask over
// stories260K's vocabulary (with and without a token budget) and check it against the matcher:
// a sample of allowed tokens must be accepted from that state, the end token is allowed exactly
// when the grammar can end, and apply() keeps exactly the allowed tokens. Aborts on a mismatch;
// pagoda::Error from the matcher's bounds (a grammar too ambiguous to follow) ends the walk.
#pragma once
#include <memory>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "grammar/grammar.h"

namespace pagoda::fuzz {

void exercise_grammar(const std::shared_ptr<const grammar::Grammar>& g, std::string_view input);

}  // namespace pagoda::fuzz
