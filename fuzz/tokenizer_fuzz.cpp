// libFuzzer entry for the tokenizers: arbitrary bytes encoded and decoded with every vocabulary in
// fixtures/vocab (and stories260K; PAGODA_FIXTURES names the folder, PAGODA_FUZZ_VOCAB=NAME keeps
// one). The first byte picks the vocabulary and the options; the rest is the text, and also, read
// as 16-bit words, a sequence of token ids to decode.
// Oracles (the contracts tokenizer.h and stream_decoder.h state): encode returns ids in range;
// decode returns valid UTF-8; for valid UTF-8 text encoded without special-token parsing, decode
// gives the text back unless an unknown token stood in for some of it or the vocabulary has no
// token for one of its bytes (falcon has none for some control bytes: those are dropped, as
// llama.cpp, whose test vectors come with these vocabularies, drops them) or, for SentencePiece,
// the text holds U+2581 (its escaped space: it decodes as a space, as in SentencePiece itself)
// or a user-defined token's text matched (the next piece gets the dummy-prefix space, as
// llama.cpp gives it); StreamDecoder's pieces
// concatenate to decode()'s text; out-of-range ids are a pagoda::Error, never a bad read.
// NFC (unicode_nfc.h, tokenizer.json's normalizer) of the text: idempotent, valid UTF-8 stays
// valid, and ASCII is left as it is.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

using namespace pagoda;
using namespace pagoda::tokenizer;

namespace {

[[noreturn]] void fail(const char* what, const std::string& vocab) {
    std::fprintf(stderr, "fuzz: tokenizer %s: %s\n", vocab.c_str(), what);
    std::abort();
}

const std::vector<fuzz::NamedTokenizer>& tokenizers() {
    static const std::vector<fuzz::NamedTokenizer> chosen = [] {
        std::vector<fuzz::NamedTokenizer> out;
        const char* only = std::getenv("PAGODA_FUZZ_VOCAB");
        for (const auto& t : fuzz::all_tokenizers())
            if (!only || !*only || t.name.find(only) != std::string::npos) out.push_back(t);
        return out;
    }();
    return chosen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto& all = tokenizers();
    if (all.empty() || size == 0) return 0;
    const uint8_t control = data[0];
    const fuzz::NamedTokenizer& named = all[(control & 0x0f) % all.size()];
    const Tokenizer& tok = *named.tokenizer;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    const std::string normalized = nfc(text), nfc_name = "nfc";
    if (nfc(normalized) != normalized) fail("NFC is not idempotent", nfc_name);
    if (utf8_valid(text) && !utf8_valid(normalized)) fail("NFC made valid UTF-8 invalid", nfc_name);
    if (nfc_trivially_unchanged(text) && normalized != text) fail("NFC changed ASCII text", nfc_name);

    EncodeOptions eo;
    eo.parse_special = control & 0x10;
    eo.add_bos = (control & 0x20) ? std::optional<bool>(tok.bos() >= 0) : std::optional<bool>(false);
    eo.add_eos = false;
    DecodeOptions dopt;
    dopt.render_special = control & 0x40;

    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text, eo);
    } catch (const Error&) {
        return 0;
    } catch (const std::exception& e) {
        fuzz::unexpected("encode", e);
    }
    bool unknown = false, literal = false;
    for (int32_t id : ids) {
        if (!tok.vocab().valid_id(id)) fail("encode returned an id out of range", named.name);
        unknown |= id == tok.vocab().unk();
        literal |= tok.vocab().token_type(id) == TokenType::user_defined || tok.vocab().token_type(id) == TokenType::control;
    }
    const std::string back = tok.decode(ids, dopt);
    if (!utf8_valid(back)) fail("decode returned invalid UTF-8", named.name);
    bool every_byte = true;
    for (unsigned char c : text) every_byte &= tok.vocab().byte_token(c) != kNoToken;
    const bool spm_space = tok.vocab().type() == VocabType::spm && text.find("\xe2\x96\x81") != std::string_view::npos;
    if (!eo.parse_special && !dopt.render_special && !unknown && !literal && every_byte && !spm_space && utf8_valid(text) && back != text)
        fail("decode(encode(text)) != text for valid UTF-8", named.name);

    // The bytes as token ids (mostly in range; some beyond it).
    std::vector<int32_t> raw;
    for (size_t i = 1; i + 1 < size && raw.size() < 512; i += 2) {
        uint16_t w;
        std::memcpy(&w, data + i, 2);
        raw.push_back(int32_t(w % (control & 0x80 ? uint32_t(tok.n_vocab()) + 8 : uint32_t(tok.n_vocab()))));
    }
    try {
        const std::string whole = tok.decode(raw, dopt);
        if (!utf8_valid(whole)) fail("decode of ids returned invalid UTF-8", named.name);
        StreamDecoder stream(tok, dopt);
        std::string pieces;
        for (int32_t id : raw) pieces += stream.feed(id);
        pieces += stream.flush();
        if (pieces != whole) fail("StreamDecoder pieces differ from decode()", named.name);
        for (int32_t id : raw) (void)tok.token_to_piece(id, dopt.render_special);
    } catch (const Error&) {
        bool out_of_range = false;
        for (int32_t id : raw) out_of_range |= !tok.vocab().valid_id(id);
        if (!out_of_range) throw;  // an in-range decode must not fail
    }
    return 0;
}
