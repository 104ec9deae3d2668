// Compiled grammars by source text, shared: requests that send the same schema or GBNF get the same
// Grammar object, which lets the engine keep one warm mask cache for all of them. Thread-safe (the
// server compiles on its I/O threads); holds the `capacity` most recently used; a source that fails
// to compile is not cached (the error reaches the caller every time).
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "grammar/grammar.h"

namespace pagoda::grammar {

class GrammarCache {
public:
    explicit GrammarCache(size_t capacity = 64) : capacity_(capacity) {}

    std::shared_ptr<const Grammar> get(const std::string& key,
                                       const std::function<std::shared_ptr<const Grammar>()>& compile);
    static GrammarCache& shared();  // the process-wide one

private:
    size_t capacity_;
    std::mutex mutex_;
    std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> entries_;  // most recent first
};

}  // namespace pagoda::grammar
