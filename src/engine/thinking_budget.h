// A thinking budget: how many tokens a choice may spend inside its reasoning block before the engine
// closes the block itself, the way the model would — by forcing the closing tag's tokens — after
// which the output continues freely (or under the request's grammar, whose answer part follows).
// The tracker follows one choice's output token by token (the tokens' text with special tokens
// rendered, so a tag that is one control token is seen too):
//   - without starts_open, a block exists only if the output starts (after white space) with the
//     opening tag; the budget counts the tokens after the one that completes it;
//   - with starts_open (the prompt ended with the opening tag) the output starts inside the block;
//   - the block ends when the closing tag appears in the text, or when `max_tokens` tokens were
//     spent inside it: the next tokens are then the closing tag's tokens, forced one per step.
// So a choice that never closes its block has exactly max_tokens reasoning tokens, then the tag.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

struct ThinkingBudget {
    std::string open = "<think>";
    std::string close = "</think>";
    bool starts_open = false;  // the prompt already opened the block
    int64_t max_tokens = 0;    // tokens inside the block before the engine closes it (>= 0)
};

class ThinkingTracker {
public:
    // `close_ids`: the closing tag's tokens (non-empty), as the engine forces them.
    ThinkingTracker(const ThinkingBudget& budget, std::vector<int32_t> close_ids);

    // The token the next step must produce (the next token of the closing tag), if any.
    std::optional<int32_t> forced() const;
    // After each generated token, with its text.
    void observe(int32_t token, std::string_view text);

    bool inside() const { return state_ == State::inside || state_ == State::closing; }
    int64_t spent() const { return spent_; }  // tokens inside the block so far (the closing tag's not counted)

private:
    enum class State { before, inside, closing, done };
    void check_budget();

    const ThinkingBudget* budget_;
    std::vector<int32_t> close_ids_;
    State state_;
    std::string text_;   // before: the output so far; inside: the tail that may hold a partial tag
    int64_t spent_ = 0;
    size_t forced_next_ = 0;  // closing: how many of close_ids_ were produced
    bool yielded_ = false;    // a forced closing tag was overruled (by the grammar): no more forcing
};

// The tokens a model writes a tag with: greedily the longest vocabulary token that spells the next
// part of it (one token where the tag is one, as Qwen3's </think>), never the leading space a
// SentencePiece encoder would add; the encoder's answer where no tokens spell the tag exactly.
std::vector<int32_t> tag_tokens(const tokenizer::Tokenizer& tok, const std::string& tag);

// Leaves only `token` possible in `logits` (nothing to do without one). False, logits untouched,
// when that token is already impossible there (a grammar masked it): the caller's mask then stands.
bool force_token(std::optional<int32_t> token, float* logits, int64_t vocab);

}  // namespace pagoda::engine
