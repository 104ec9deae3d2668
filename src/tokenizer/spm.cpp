#include "tokenizer/spm.h"


#include "core/error.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

void encode_segment(const Vocab& vocab, std::string_view text, std::vector<MergeSymbol>& symbols,
                    std::vector<int32_t>& out) {
    split_into_symbols(text, symbols);
    merge_symbols(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<double> {
        int32_t id = vocab.find(text.substr(l.start, l.length + r.length));
        if (id == kNoToken) return std::nullopt;
        return vocab.score(id);
    });

    for (int i = 0; i >= 0; i = symbols[i].next) {
        std::string_view piece = text.substr(symbols[i].start, symbols[i].length);
        if (int32_t id = vocab.find(piece); id != kNoToken) {
            out.push_back(id);
            continue;
        }
        bool all_bytes = true;
        for (char c : piece) all_bytes = all_bytes && vocab.byte_token(static_cast<uint8_t>(c)) != kNoToken;
        if (all_bytes) {
            for (char c : piece) out.push_back(vocab.byte_token(static_cast<uint8_t>(c)));
        } else if (vocab.unk() != kNoToken) {
            out.push_back(vocab.unk());  // no byte fallback in this vocabulary: one unknown per character
        } else {
            fail("text contains '{}' which this vocabulary can neither encode nor mark unknown", piece);
        }
    }
}

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
    if (text.empty()) return;
    std::vector<MergeSymbol> symbols;
    if (!vocab.spm_words_independent()) {
        encode_segment(vocab, text, symbols, out);
        return;
    }
    // Cut before every U+2581 that follows another character: no merge can cross such a cut.
    constexpr std::string_view space = "\xE2\x96\x81";
    size_t start = 0;
    for (size_t at = text.find(space, 1); at != std::string_view::npos; at = text.find(space, at + space.size())) {
        if (at >= space.size() && text.compare(at - space.size(), space.size(), space) == 0) continue;
        encode_segment(vocab, text.substr(start, at - start), symbols, out);
        start = at;
    }
    encode_segment(vocab, text.substr(start), symbols, out);
}

}  // namespace pagoda::tokenizer
