#include "tokenizer/unigram.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
constexpr double kUnkPenalty = 10.0;                 // SentencePiece's kUnkPenalty

// llama.cpp's (SentencePiece's) whitespace handling: with `merge`, leading and trailing spaces go and
// runs become one; with `prefix`, one U+2581 goes before the first non-space character.
std::string escape_spaces(std::string_view text, bool prefix, bool merge) {
    std::string out;
    out.reserve(text.size() * 3 / 2 + 3);
    bool in_word = false, prefixed = false;
    for (char c : text) {
        if (c != ' ') {
            if (!in_word) {
                in_word = true;
                if ((prefix && !prefixed) || merge) {
                    out += kSpace;
                    prefixed = true;
                }
            }
            out += c;
        } else {
            in_word = false;
            if (!merge) out += kSpace;
        }
    }
    // merge adds U+2581 before each word, the first one included; without prefix it must not stay there.
    if (merge && !prefix && out.starts_with(kSpace)) out.erase(0, kSpace.size());
    return out;
}

}  // namespace

UnigramEncoder::UnigramEncoder(const Vocab& vocab) : vocab_(vocab) {
    if (!vocab.precompiled_charsmap().empty()) charsmap_ = std::make_unique<Charsmap>(vocab.precompiled_charsmap());
    double min_score = std::numeric_limits<double>::infinity();
    for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
        const TokenType t = vocab.token_type(id);
        // The lowest score of the model's own pieces (byte pieces count, as in Hugging Face's).
        if (t == TokenType::normal || t == TokenType::byte) min_score = std::min<double>(min_score, vocab.score(id));
        if (t != TokenType::normal && t != TokenType::user_defined && t != TokenType::unused) continue;
        const std::string& text = vocab.text(id);
        if (text.empty()) continue;
        pieces_[text] = id;  // later duplicates win, as in the vocabulary itself
        max_piece_bytes_ = std::max(max_piece_bytes_, text.size());
    }
    unk_score_ = (min_score == std::numeric_limits<double>::infinity() ? 0.0 : min_score) - kUnkPenalty;
}

UnigramEncoder::~UnigramEncoder() = default;

int32_t UnigramEncoder::find_piece(std::string_view text) const {
    auto it = pieces_.find(text);
    return it == pieces_.end() ? kNoToken : it->second;
}

std::string UnigramEncoder::normalize(std::string_view text, bool first) const {
    std::string s = !charsmap_                     ? utf8_sanitize(text)
                    : vocab_.charsmap_graphemes() ? charsmap_->normalize_graphemes(text)
                                                  : charsmap_->normalize(text);
    if (vocab_.prepend_scheme().empty()) {
        // A GGUF vocabulary: SentencePiece's own rules, as llama.cpp applies them.
        return escape_spaces(s, vocab_.add_space_prefix(), vocab_.remove_extra_whitespaces());
    }
    if (vocab_.remove_extra_whitespaces()) {
        s = escape_spaces(s, false, true);
    } else {
        std::string escaped;
        escaped.reserve(s.size() * 3 / 2);
        bool previous_space = false;
        for (char c : s) {
            const bool space = c == ' ';
            if (space && previous_space && vocab_.collapse_spaces()) continue;
            previous_space = space;
            if (space)
                escaped += kSpace;
            else
                escaped += c;
        }
        s.swap(escaped);
    }
    const std::string& scheme = vocab_.prepend_scheme();
    const bool prepend = scheme == "always" || (scheme == "first" && first);
    if (prepend && !s.empty() && !s.starts_with(kSpace)) s.insert(0, kSpace);
    return s;
}

void UnigramEncoder::encode(std::string_view text, bool first, std::vector<int32_t>& out) const {
    const std::string normalized = normalize(text, first);
    if (!vocab_.split_words()) {
        segment(normalized, out);
        return;
    }
    // Metaspace split: a new piece starts at every U+2581 (which stays with the text after it).
    size_t start = 0;
    for (size_t at = normalized.find(kSpace, 1); at != std::string::npos; at = normalized.find(kSpace, at + 1)) {
        segment(std::string_view(normalized).substr(start, at - start), out);
        start = at;
    }
    segment(std::string_view(normalized).substr(start), out);
}

void UnigramEncoder::segment(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    struct Best {
        double score = -std::numeric_limits<double>::infinity();
        size_t start = 0;
        int32_t id = kNoToken;  // kNoToken with a finite score: an unknown character
        bool set = false;
    };
    std::vector<Best> best(text.size() + 1);
    best[0].score = 0;
    best[0].set = true;
    for (size_t start = 0; start < text.size();) {
        const size_t char_len = utf8_sequence_length(text, start);
        if (!best[start].set) {  // inside a character (cannot happen on valid UTF-8)
            start += char_len;
            continue;
        }
        const double here = best[start].score;
        bool single_char_piece = false;
        const size_t longest = std::min(max_piece_bytes_, text.size() - start);
        for (size_t len = 1; len <= longest; ++len) {
            const int32_t id = find_piece(text.substr(start, len));
            if (id == kNoToken) continue;
            if (len == char_len) single_char_piece = true;
            Best& target = best[start + len];
            const double candidate = here + vocab_.score(id);
            if (!target.set || candidate > target.score) target = {candidate, start, id, true};
        }
        if (!single_char_piece) {
            Best& target = best[start + char_len];
            const double candidate = here + unk_score_;
            if (!target.set || candidate > target.score) target = {candidate, start, kNoToken, true};
        }
        start += char_len;
    }
    // Walk back; adjacent unknown characters fuse into one unknown piece.
    struct Piece {
        size_t start, end;
        int32_t id;
    };
    std::vector<Piece> pieces;
    for (size_t end = text.size(); end > 0;) {
        const Best& b = best[end];
        if (b.id == kNoToken && !pieces.empty() && pieces.back().id == kNoToken)
            pieces.back().start = b.start;
        else
            pieces.push_back({b.start, end, b.id});
        end = b.start;
    }
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        if (it->id != kNoToken) {
            out.push_back(it->id);
            continue;
        }
        const std::string_view unknown = text.substr(it->start, it->end - it->start);
        if (int32_t id = find_piece(unknown); id != kNoToken) {  // Hugging Face looks the fused text up
            out.push_back(id);
            continue;
        }
        if (vocab_.byte_fallback()) {
            bool all = true;
            for (char c : unknown) all = all && vocab_.byte_token(static_cast<uint8_t>(c)) != kNoToken;
            if (all) {
                for (char c : unknown) out.push_back(vocab_.byte_token(static_cast<uint8_t>(c)));
                continue;
            }
        }
        if (vocab_.unk() == kNoToken)
            fail("text contains '{}' which this Unigram vocabulary can neither encode nor mark unknown", unknown);
        out.push_back(vocab_.unk());
    }
}

}  // namespace pagoda::tokenizer
