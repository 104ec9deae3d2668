// BPE encoding of one pre-tokenized word (in byte-level form, or U+2581-escaped UTF-8 for
// SentencePiece-style BPE, which falls back to <0xXX> tokens for characters with no token): start from its
// characters and repeatedly apply the merge with the lowest rank (ties: leftmost) until none applies,
// with a priority queue and lazy invalidation. Results are cached per word (bounded, thread-safe)
// because natural text repeats words heavily.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

class BpeEncoder {
public:
    explicit BpeEncoder(const Vocab& vocab) : vocab_(vocab) {}
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;

private:
    void merge_word(std::string_view word, std::vector<int32_t>& out) const;
    bool has_byte_tokens(std::string_view chars) const;  // every byte has a <0xXX> token

    static constexpr size_t kCacheEntries = 1 << 16;
    static constexpr size_t kCacheableLength = 64;  // longer words are rare; not worth caching
    const Vocab& vocab_;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace pagoda::tokenizer
