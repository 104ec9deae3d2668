#include "engine/text_stream.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {

std::string TextStream::feed(int32_t token) {
    if (!tokenizer_) return {};
    pending_ += tokenizer_->token_to_piece(token);
    const size_t hold = tokenizer::utf8_incomplete_tail(pending_);
    std::string ready = tokenizer::utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return ready;
}

std::string TextStream::flush() {
    std::string rest = tokenizer::utf8_sanitize(pending_);
    pending_.clear();
    return rest;
}

}  // namespace pagoda::engine
