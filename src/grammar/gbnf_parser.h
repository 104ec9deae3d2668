// GBNF (llama.cpp's grammar notation) -> GrammarSpec / Grammar.
//   root ::= "yes" | "no"          rules: name ::= alternatives; names are [A-Za-z0-9_-]+
//   "lit\n\x41\u00e9"              literals with \n \r \t \\ \" \' \[ \] \- \xHH \uHHHH \UHHHHHHHH
//   [a-z_] [^"\\] .                character classes (ranges, negation, the same escapes), any character
//   ( ... )  x* x+ x? x{m} x{m,} x{m,n}   groups and repetition
//   # comment                      to the end of the line
// Newlines are ordinary white space; a rule ends where the next `name ::=` begins. Every problem is
// a pagoda::Error "grammar: line L, column C: ..." (the position in code points, from 1); nesting
// deeper than a fixed bound is an error, never unbounded recursion.
#pragma once
#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace pagoda::grammar {

GrammarSpec parse_gbnf_spec(std::string_view text);
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text);  // parse + compile (root: "root")

}  // namespace pagoda::grammar
