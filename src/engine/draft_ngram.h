// Prompt-lookup drafting: the tokens that followed the most recent earlier occurrence of the
// context's last n tokens (n from n_max down to n_min, the longest match wins) are proposed as the
// continuation. Free to compute (no model), and right whenever the output copies from its input:
// editing, extraction, summaries that quote, code that repeats its identifiers.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::engine {

// At most max_tokens proposed tokens; empty when no suffix of length n_min..n_max occurs earlier.
std::vector<int32_t> propose_ngram_draft(std::span<const int32_t> context, int32_t n_min, int32_t n_max,
                                         int32_t max_tokens);

}  // namespace pagoda::engine
