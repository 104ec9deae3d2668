// The grammar maskers of recent requests. A request's masker depends on its grammar and its end
// tokens; requests with the same pair share one (the server hands out one compiled grammar per
// distinct schema), so its mask cache and state table stay warm across requests. The vocabulary's
// token trie is built once, on the first request with a grammar.
#pragma once
#include <list>
#include <memory>

#include "engine/request.h"
#include "grammar/token_mask.h"

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

class MaskerCache {
public:
    // The masker for `request`'s grammar (not null) and end tokens: its stop_token_ids, and the
    // tokenizer's end-of-generation tokens unless ignore_eos. Keeps the 8 most recently used.
    std::shared_ptr<grammar::TokenMasker> masker_for(const Request& request, const tokenizer::Tokenizer& tokenizer);

private:
    std::shared_ptr<const grammar::TokenTrie> trie_;
    std::list<std::shared_ptr<grammar::TokenMasker>> maskers_;  // most recently used first
};

}  // namespace pagoda::engine
