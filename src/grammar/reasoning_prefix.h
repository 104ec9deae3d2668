// A grammar for "think freely, then answer": an optional reasoning block in the model's own tags
// before the answer grammar. Inside the block any text is allowed except the closing tag (its first
// occurrence closes the block); the answer grammar applies only to what follows the block.
//   - Without `starts_open`, the output is `open body close answer` or just `answer` (white space
//     may follow the closing tag, as the reasoning splitter drops it).
//   - With `starts_open` (the rendered prompt already ends with the opening tag), the output starts
//     inside the block: `body close answer`; the block must be closed.
//   - With `after_close` / `answer_open` (harmony): `open body close after_close answer_open answer`
//     or `answer_open answer`.
// The answer grammar's rules are renamed (prefixed "answer-") so they cannot collide with the
// block's. Throws pagoda::Error for empty tags.
#pragma once
#include <memory>
#include <string>

#include "grammar/grammar.h"

namespace pagoda::grammar {

struct ReasoningTags {
    std::string open = "<think>";
    std::string close = "</think>";
    // Harmony-style blocks: what follows the closing tag (instead of optional white space), and
    // what opens the answer in either form (`open body close after_close answer_open answer` or
    // `answer_open answer`). Empty: nothing.
    std::string after_close;
    std::string answer_open;
};

std::shared_ptr<const Grammar> with_reasoning_prefix(const Grammar& answer, const ReasoningTags& tags, bool starts_open);

// The spec of `answer` with every rule renamed `prefix` + name (for composing grammars).
GrammarSpec spec_of(const Grammar& answer, const std::string& prefix);

}  // namespace pagoda::grammar
