// Incremental detokenization for streaming output. feed() takes one id and returns the text that is
// now final: it never ends inside a UTF-8 character (an incomplete sequence is held back until the
// bytes that complete it arrive) and bytes that can never become valid UTF-8 are emitted as U+FFFD.
// flush() returns whatever is still held (an unfinished sequence becomes U+FFFD). The concatenation of
// all feed() results and flush() equals Tokenizer::decode() of the same ids with the same options,
// including the SentencePiece leading-space rule.
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pagoda::tokenizer {

class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});
    std::string feed(int32_t id);
    std::string flush();
    void reset();  // start a new stream (the leading-space rule applies again)

private:
    const Tokenizer& tokenizer_;
    DecodeOptions options_;
    std::string pending_;         // bytes of an incomplete UTF-8 sequence
    bool at_start_ = true;        // nothing produced yet (the leading space may still be stripped)
};

}  // namespace pagoda::tokenizer
