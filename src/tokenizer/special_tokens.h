// Splits input text into plain-text fragments and literal special tokens before normal tokenization.
// Scanning left to right, the longest special-token text that starts at the current position wins
// (Hugging Face's added-token matching). User-defined tokens always match; control and unknown-type
// tokens match only when `parse_special` is set, so user text cannot inject control tokens by default.
// Tokens marked rstrip/lstrip swallow the ASCII whitespace after/before them, as llama.cpp does.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

struct Fragment {
    int32_t token = kNoToken;  // kNoToken for plain text
    std::string_view text;     // the plain text (empty for tokens)
    bool is_token() const { return token != kNoToken; }
};

class SpecialTokenMatcher {
public:
    explicit SpecialTokenMatcher(const Vocab& vocab);
    std::vector<Fragment> split(std::string_view text, bool parse_special) const;

private:
    const Vocab& vocab_;
    // Candidate tokens by first byte, longest text first.
    std::vector<int32_t> by_first_byte_[256];
};

}  // namespace pagoda::tokenizer
