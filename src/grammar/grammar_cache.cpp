#include "grammar/grammar_cache.h"

namespace pagoda::grammar {

std::shared_ptr<const Grammar> GrammarCache::get(const std::string& key,
                                                 const std::function<std::shared_ptr<const Grammar>()>& compile) {
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (it->first == key) {
                entries_.splice(entries_.begin(), entries_, it);
                return entries_.front().second;
            }
    }
    auto grammar = compile();  // outside the lock: a large schema must not stall other requests
    std::lock_guard lock(mutex_);
    for (const auto& [k, g] : entries_)
        if (k == key) return g;  // compiled meanwhile by another thread
    entries_.emplace_front(key, grammar);
    if (entries_.size() > capacity_) entries_.pop_back();
    return grammar;
}

GrammarCache& GrammarCache::shared() {
    static GrammarCache cache;
    return cache;
}

}  // namespace pagoda::grammar
