#include "engine/masker_cache.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace pagoda::engine {

std::shared_ptr<grammar::TokenMasker> MaskerCache::masker_for(const Request& req, const tokenizer::Tokenizer& tokenizer) {
    // Tokens that end the output are allowed only where the grammar may end.
    std::vector<int32_t> ends = req.stop.stop_token_ids;
    if (!req.stop.ignore_eos) ends.insert(ends.end(), tokenizer.vocab().eog_ids().begin(), tokenizer.vocab().eog_ids().end());
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    for (auto it = maskers_.begin(); it != maskers_.end(); ++it)
        if (&(*it)->grammar() == req.grammar.get() && (*it)->end_tokens() == ends) {
            maskers_.splice(maskers_.begin(), maskers_, it);
            return maskers_.front();
        }
    constexpr size_t kKeep = 8;
    if (maskers_.size() >= kKeep) maskers_.pop_back();
    if (!trie_) trie_ = std::make_shared<const grammar::TokenTrie>(tokenizer);
    maskers_.push_front(std::make_shared<grammar::TokenMasker>(req.grammar, trie_, std::move(ends)));
    return maskers_.front();
}

}  // namespace pagoda::engine
