#include "tokenizer/bpe.h"

#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

bool BpeEncoder::has_byte_tokens(std::string_view chars) const {
    for (char c : chars)
        if (vocab_.byte_token(uint8_t(c)) == kNoToken) return false;
    return true;
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (vocab_.ignore_merges()) {
        if (int32_t id = vocab_.find(word); id != kNoToken) {
            out.push_back(id);
            return;
        }
    }
    const bool cacheable = word.size() <= kCacheableLength;
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        if (auto it = cache_.find(word); it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    size_t first = out.size();
    merge_word(word, out);
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        if (cache_.size() >= kCacheEntries) cache_.clear();  // crude but bounded; refills with hot words
        cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
    }
}

void BpeEncoder::merge_word(std::string_view word, std::vector<int32_t>& out) const {
    std::vector<MergeSymbol> symbols;
    symbols.reserve(word.size());
    split_into_symbols(word, symbols);
    // Lower merge ranks merge first: the priority is the negated rank.
    merge_symbols(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<double> {
        int32_t rank = vocab_.merge_rank(word.substr(l.start, l.length), word.substr(r.start, r.length));
        if (rank < 0) return std::nullopt;
        return -double(rank);
    });

    for (int i = 0; i >= 0; i = symbols[i].next) {
        std::string_view piece = word.substr(symbols[i].start, symbols[i].length);
        if (int32_t id = vocab_.find(piece); id != kNoToken) {
            out.push_back(id);
            continue;
        }
        // A character with no token, or a merge result that is not one (a malformed vocabulary): its
        // characters, and in SentencePiece-style BPE a character with no token as its <0xXX> byte tokens.
        for (size_t pos = 0; pos < piece.size();) {
            size_t len = utf8_sequence_length(piece, pos);
            int32_t id = vocab_.find(piece.substr(pos, len));
            if (id == kNoToken && vocab_.spm_style_bpe() && has_byte_tokens(piece.substr(pos, len))) {
                for (size_t b = pos; b < pos + len; ++b) out.push_back(vocab_.byte_token(uint8_t(piece[b])));
                pos += len;
                continue;
            }
            if (id == kNoToken) id = vocab_.unk();
            if (id != kNoToken) out.push_back(id);
            pos += len;
        }
    }
}

}  // namespace pagoda::tokenizer
