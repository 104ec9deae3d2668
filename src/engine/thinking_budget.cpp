#include "engine/thinking_budget.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::engine {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

ThinkingTracker::ThinkingTracker(const ThinkingBudget& budget, std::vector<int32_t> close_ids)
    : budget_(&budget), close_ids_(std::move(close_ids)), state_(budget.starts_open ? State::inside : State::before) {
    if (close_ids_.empty()) fail("the closing tag '{}' encodes to no tokens", budget.close);
    if (budget.max_tokens < 0) fail("a thinking budget must be at least 0 tokens, got {}", budget.max_tokens);
    if (budget.open.empty() || budget.close.empty()) fail("a thinking budget needs an opening and a closing tag");
    check_budget();
}

std::optional<int32_t> ThinkingTracker::forced() const {
    if (state_ != State::closing) return std::nullopt;
    return close_ids_[forced_next_];
}

void ThinkingTracker::check_budget() {
    if (state_ == State::inside && !yielded_ && spent_ >= budget_->max_tokens) {
        state_ = State::closing;
        forced_next_ = 0;
    }
}

void ThinkingTracker::observe(int32_t token, std::string_view text) {
    const std::string& open = budget_->open;
    const std::string& close = budget_->close;
    switch (state_) {
        case State::before: {
            text_.append(text);
            size_t i = 0;
            while (i < text_.size() && is_space(text_[i])) ++i;
            const std::string_view rest = std::string_view(text_).substr(i);
            if (rest.size() >= open.size() && rest.substr(0, open.size()) == open) {
                // The token that completes the tag opens the block; text after the tag in the same
                // token already counts as reasoning (the token is not counted: it carries the tag).
                text_ = std::string(rest.substr(open.size()));
                state_ = State::inside;
                if (text_.find(close) != std::string::npos) state_ = State::done;
                check_budget();
            } else if (std::string_view(open).substr(0, rest.size()) != rest) {
                state_ = State::done;  // the output does not start with a block
                text_.clear();
            }
            return;
        }
        case State::inside: {
            if (!yielded_) ++spent_;
            text_.append(text);
            if (text_.find(close) != std::string::npos) {
                state_ = State::done;  // the model closed the block itself
                text_.clear();
                return;
            }
            if (text_.size() > close.size()) text_.erase(0, text_.size() - close.size());
            check_budget();
            return;
        }
        case State::closing:
            if (token != close_ids_[forced_next_]) {
                // Something else had the last word (a grammar that must close the block in fewer
                // tokens than its budget leaves): stop forcing, watch for the tag like the model's own.
                yielded_ = true;
                state_ = State::inside;
                text_.append(text);
                if (text_.find(close) != std::string::npos) {
                    state_ = State::done;
                    text_.clear();
                }
                return;
            }
            text_.append(text);
            if (++forced_next_ == close_ids_.size()) {
                state_ = State::done;
                text_.clear();
            }
            return;
        case State::done:
            return;
    }
}

std::vector<int32_t> tag_tokens(const tokenizer::Tokenizer& tok, const std::string& tag) {
    std::vector<int32_t> ids;
    for (size_t at = 0; at < tag.size();) {
        size_t len = tag.size() - at;
        for (; len > 0; --len) {
            const std::string part = tag.substr(at, len);
            const int32_t id = tok.vocab().find(part);
            if (id >= 0 && id < tok.n_vocab() && tok.token_to_piece(id, true) == part) {
                ids.push_back(id);
                break;
            }
        }
        if (len == 0) {
            // A byte-fallback vocabulary spells a byte it has no piece for with its byte token.
            const int32_t id = tok.vocab().find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(tag[at])));
            if (id < 0 || id >= tok.n_vocab() || tok.token_to_piece(id, true) != tag.substr(at, 1))
                return tok.encode(tag, {.add_bos = false, .add_eos = false, .parse_special = true});
            ids.push_back(id);
            len = 1;
        }
        at += len;
    }
    return ids;
}

bool force_token(std::optional<int32_t> token, float* logits, int64_t vocab) {
    if (!token) return true;
    const int32_t id = *token;
    if (id < 0 || id >= vocab || logits[id] == -std::numeric_limits<float>::infinity()) return false;
    const float keep = logits[id];
    std::fill(logits, logits + vocab, -std::numeric_limits<float>::infinity());
    logits[id] = keep;
    return true;
}

}  // namespace pagoda::engine
