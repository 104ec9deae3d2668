#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace pagoda::tokenizer {

namespace {
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    if (vocab_.type() == VocabType::bpe) {
        pre_ = std::make_unique<PreTokenizer>(vocab_.pre(), vocab_.pre_patterns());
        bpe_ = std::make_unique<BpeEncoder>(vocab_);
    }
    specials_ = std::make_unique<SpecialTokenMatcher>(vocab_);
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
    return from_vocab(Vocab::from_gguf(file));
}

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab)));
}

void Tokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
    // tokenizer.json's normalizer runs on each piece between added tokens, as here.
    if (vocab_.nfc() && !nfc_trivially_unchanged(text)) {
        const std::string normalized = nfc(text);
        encode_text_normalized(normalized, after_special, out);
        return;
    }
    encode_text_normalized(text, after_special, out);
}

void Tokenizer::encode_text_normalized(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
    if (vocab_.type() == VocabType::spm) {
        // SentencePiece sees spaces as U+2581 and, like llama.cpp, gets a dummy space at the start of
        // the text and again after every special token.
        std::string escaped;
        escaped.reserve(text.size() + 8);
        if (vocab_.add_space_prefix() && after_special) escaped += kSpmSpace;
        for (char c : text) {
            if (c == ' ')
                escaped += kSpmSpace;
            else
                escaped += c;
        }
        spm_encode(vocab_, escaped, out);
        return;
    }
    std::string word;
    for (std::string_view piece : pre_->split(text)) {
        word.clear();
        byte_level_encode(piece, word);
        bpe_->encode_word(word, out);
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (options.add_bos.value_or(vocab_.add_bos())) {
        if (vocab_.bos() == kNoToken) fail("cannot add BOS: this vocabulary has no BOS token");
        out.push_back(vocab_.bos());
    }
    bool after_special = true;
    for (const Fragment& f : specials_->split(text, options.parse_special)) {
        if (f.is_token()) {
            out.push_back(f.token);
            after_special = true;
        } else {
            encode_text(f.text, after_special, out);
            after_special = false;
        }
    }
    if (options.add_eos.value_or(vocab_.add_eos())) {
        if (vocab_.eos() == kNoToken) fail("cannot add EOS: this vocabulary has no EOS token");
        out.push_back(vocab_.eos());
    }
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    if (!vocab_.valid_id(id)) fail("token id {} is out of range (vocabulary has {} tokens)", id, vocab_.n_tokens());
    const std::string& text = vocab_.text(id);
    std::string out;
    switch (vocab_.token_type(id)) {
        case TokenType::control:
        case TokenType::unknown:
            if (render_special) out = text;
            break;
        case TokenType::user_defined:
            out = text;  // stored verbatim by the converters
            break;
        case TokenType::unused:
        case TokenType::undefined:
            break;
        case TokenType::byte:
            if (int b = vocab_.byte_value(id); b >= 0) {
                out += static_cast<char>(b);
                break;
            }
            [[fallthrough]];
        case TokenType::normal:
            if (vocab_.type() == VocabType::spm) {
                out.reserve(text.size());
                for (size_t pos = 0; pos < text.size();) {
                    if (text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0) {
                        out += ' ';
                        pos += kSpmSpace.size();
                    } else {
                        out += text[pos++];
                    }
                }
            } else {
                byte_level_decode(text, out);
            }
            break;
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const {
    std::string raw;
    for (int32_t id : ids) raw += token_to_piece(id, options.render_special);
    std::string_view view = raw;
    if (strips_leading_space() && !view.empty() && view.front() == ' ') view.remove_prefix(1);
    return utf8_sanitize(view);
}

}  // namespace pagoda::tokenizer
