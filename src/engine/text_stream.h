// Incremental detokenization of generated tokens that continue a prompt. Unlike
// tokenizer::StreamDecoder, the first generated piece keeps its leading space (the SentencePiece
// rule that drops it applies to text that starts a document, not to a continuation: "Once upon a
// time" + " there"). feed() returns only complete UTF-8 characters; bytes that can never form one
// become U+FFFD; flush() releases an unfinished tail (as U+FFFD). Control tokens render as nothing.
#pragma once
#include <cstdint>
#include <string>

namespace pagoda::tokenizer {
class Tokenizer;
}

namespace pagoda::engine {

class TextStream {
public:
    explicit TextStream(const tokenizer::Tokenizer* tokenizer = nullptr) : tokenizer_(tokenizer) {}
    std::string feed(int32_t token);  // "" without a tokenizer
    std::string flush();

private:
    const tokenizer::Tokenizer* tokenizer_;
    std::string pending_;
};

}  // namespace pagoda::engine
