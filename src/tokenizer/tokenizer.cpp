#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bert_normalizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/unigram.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece.h"

namespace pagoda::tokenizer {

namespace {
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    if (vocab_.type() == VocabType::bpe) {
        pre_ = std::make_unique<PreTokenizer>(vocab_.pre(), vocab_.pre_patterns());
        bpe_ = std::make_unique<BpeEncoder>(vocab_);
    }
    if (vocab_.type() == VocabType::ugm) ugm_ = std::make_unique<UnigramEncoder>(vocab_);
    specials_ = std::make_unique<SpecialTokenMatcher>(vocab_);
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
    return from_vocab(Vocab::from_gguf(file));
}

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab)));
}

bool Tokenizer::strips_leading_space() const {
    switch (vocab_.type()) {
        case VocabType::spm: return vocab_.add_space_prefix();
        case VocabType::bpe: return false;
        case VocabType::wpm: return true;  // every word-start piece renders with a space before it
        case VocabType::ugm:
            return vocab_.prepend_scheme().empty() ? vocab_.add_space_prefix() : vocab_.prepend_scheme() != "never";
    }
    return false;
}

void Tokenizer::encode_text(std::string_view text, bool after_special, bool first, std::vector<int32_t>& out) const {
    // tokenizer.json's normalizer runs on each piece between added tokens, as here.
    if (vocab_.nfc() && !nfc_trivially_unchanged(text)) {
        const std::string normalized = nfc(text);
        encode_text_normalized(normalized, after_special, first, out);
        return;
    }
    encode_text_normalized(text, after_special, first, out);
}

void Tokenizer::encode_text_normalized(std::string_view text, bool after_special, bool first,
                                       std::vector<int32_t>& out) const {
    if (vocab_.type() == VocabType::wpm) {
        for (const std::string& word : bert_words(text, vocab_.bert_options())) wordpiece_encode_word(vocab_, word, out);
        return;
    }
    if (vocab_.type() == VocabType::ugm) {
        ugm_->encode(text, first, out);
        return;
    }
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
    if (vocab_.spm_style_bpe()) {
        // Spaces become U+2581 first; the split then only separates runs of newlines from the rest.
        // A newline run that is itself a token stays whole, as llama.cpp keeps it, whatever the merges say.
        std::string escaped;
        escaped.reserve(text.size() + 8);
        for (char c : text) {
            if (c == ' ')
                escaped += kSpmSpace;
            else
                escaped += c;
        }
        for (std::string_view piece : pre_->split(escaped)) {
            if (piece.front() == '\n') {
                if (int32_t id = vocab_.find(piece); id != kNoToken) {
                    out.push_back(id);
                    continue;
                }
            }
            bpe_->encode_word(piece, out);
        }
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
            encode_text(f.text, after_special, f.text.data() == text.data(), out);
            after_special = false;
        }
    }
    // BERT ends with its separator (llama.cpp's add_sep), the others with EOS.
    if (options.add_eos.value_or(vocab_.add_eos() || vocab_.add_sep())) {
        if (vocab_.add_eos() || !vocab_.add_sep()) {
            if (vocab_.eos() == kNoToken) fail("cannot add EOS: this vocabulary has no EOS token");
            out.push_back(vocab_.eos());
        }
        if (vocab_.add_sep()) out.push_back(vocab_.sep());
    }
    return out;
}

PairEncoding Tokenizer::encode_pair(std::string_view a, std::string_view b, bool parse_special) const {
    PairEncoding out;
    EncodeOptions plain;
    plain.add_bos = plain.add_eos = false;
    plain.parse_special = parse_special;
    for (const TemplatePiece& p : vocab_.pair_template()) {
        if (p.token != kNoToken) {
            out.ids.push_back(p.token);
        } else {
            const std::vector<int32_t> ids = encode(p.sequence == 0 ? a : b, plain);
            out.ids.insert(out.ids.end(), ids.begin(), ids.end());
        }
        out.type_ids.resize(out.ids.size(), p.type_id);
    }
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    if (!vocab_.valid_id(id)) fail("token id {} is out of range (vocabulary has {} tokens)", id, vocab_.n_tokens());
    const std::string& text = vocab_.text(id);
    std::string out;
    if (vocab_.type() == VocabType::wpm) return wordpiece_piece(id, render_special);
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
            if (vocab_.type() == VocabType::spm || vocab_.type() == VocabType::ugm || vocab_.spm_style_bpe()) {
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

// WordPiece pieces as Hugging Face's WordPiece decoder joins them: a continuation piece loses its
// prefix and attaches; any other token (special ones too, when rendered) is a new word after a space.
std::string Tokenizer::wordpiece_piece(int32_t id, bool render_special) const {
    const std::string& text = vocab_.text(id);
    switch (vocab_.token_type(id)) {
        case TokenType::control:
        case TokenType::unknown:
            return render_special ? " " + text : std::string();
        case TokenType::unused:
        case TokenType::undefined:
            return {};
        default:
            break;
    }
    const std::string& cont = vocab_.continuing_prefix();
    const std::string& word = vocab_.word_prefix();
    if (!cont.empty() && text.starts_with(cont)) return text.substr(cont.size());
    if (word.empty()) return " " + text;
    if (text.starts_with(word)) return " " + text.substr(word.size());
    return text;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const {
    std::string raw;
    for (int32_t id : ids) raw += token_to_piece(id, options.render_special);
    std::string_view view = raw;
    if (strips_leading_space() && !view.empty() && view.front() == ' ') view.remove_prefix(1);
    return utf8_sanitize(view);
}

}  // namespace pagoda::tokenizer
