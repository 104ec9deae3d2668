#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string StreamDecoder::feed(int32_t id) {
    std::string piece = tokenizer_.token_to_piece(id, options_.render_special);
    if (piece.empty()) return {};
    std::string_view view = piece;
    if (at_start_) {
        at_start_ = false;
        if (tokenizer_.strips_leading_space() && view.front() == ' ') view.remove_prefix(1);
    }
    pending_.append(view);
    size_t hold = utf8_incomplete_tail(pending_);
    std::string ready = utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return ready;
}

std::string StreamDecoder::flush() {
    std::string rest = utf8_sanitize(pending_);
    pending_.clear();
    return rest;
}

void StreamDecoder::reset() {
    pending_.clear();
    at_start_ = true;
}

}  // namespace pagoda::tokenizer
