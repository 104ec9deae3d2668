// A JSON-schema `pattern` (an ECMAScript regular expression) -> a GBNF expression for the body of a
// JSON string (between its quotes) whose decoded text the pattern matches. Supported: literals,
// `.`, classes `[...]` / `[^...]` with ranges, \d \w \s \D \W \S (the negated ones outside classes),
// the usual escapes (\n \t \uHHHH \xHH, escaped punctuation), groups `(...)` / `(?:...)`,
// alternation, `* + ? {m} {m,} {m,n}` (lazy `?` suffixes too: same language), `^` at the start and
// `$` at the end. An unanchored side matches anything there, as JSON Schema says. Characters that
// JSON must escape come out as their escapes (`\"`, `\\`, `\n`, ...). Anything else (backreferences,
// lookaround, \b, Unicode properties, ...) is a pagoda::Error naming it.
#pragma once
#include <string>
#include <string_view>

namespace pagoda::grammar {

// `any_char` names the GBNF rule for one arbitrary JSON string character (used where unanchored).
std::string regex_to_gbnf(std::string_view pattern, const std::string& any_char);

// The same pattern over raw text (vLLM's guided_regex): a GBNF expression for the texts the WHOLE
// pattern matches, as Python's re.fullmatch (`^` and `$` are then redundant); no JSON escaping.
std::string regex_to_gbnf_text(std::string_view pattern);

}  // namespace pagoda::grammar
