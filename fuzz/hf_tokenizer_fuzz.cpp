// libFuzzer entry for Hugging Face tokenizer files: the input is tokenizer.json's text, optionally
// followed by a NUL byte and tokenizer_config.json's text, given to parse_hf_tokenizer.
// Oracles (hf_tokenizer.h's contract): a refusal is a pagoda::Error; a spec that parses is one
// Vocab::from_spec accepts, whose tokenizer encodes text to ids in range; writing it back
// (render_hf_tokenizer) and parsing that again succeeds with the same tokens, and for byte-level
// BPE (whose merges are written as read) the same ids for the same text. WordPiece and Unigram
// files (BertNormalizer, Precompiled charsmaps, Metaspace) also encode the raw input bytes (invalid
// UTF-8 included) and a pair, with ids in range and one type id per id. Every input is also tried as
// a raw precompiled charsmap blob: refused with a pagoda::Error or normalizing to valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "fuzz/fuzz_support.h"
#include "tokenizer/charsmap.h"
#include "tokenizer/utf8.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

using namespace pagoda;
using namespace pagoda::tokenizer;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz: hf_tokenizer: %s\n", what);
    std::abort();
}


void check_charsmap(std::string_view input) {
    try {
        const Charsmap map{std::string(input)};
        if (!utf8_valid(map.normalize(input.substr(0, 64)))) fail("a charsmap normalized to invalid UTF-8");
    } catch (const Error&) {
    } catch (const std::exception& e) {
        fuzz::unexpected("a raw charsmap", e);
    }
}

void check_encoder(const Tokenizer& tok, std::string_view input) {
    std::vector<int32_t> ids;
    PairEncoding pair;
    try {
        ids = tok.encode(input.substr(0, 300), {.add_bos = false, .add_eos = false, .parse_special = false});
        pair = tok.encode_pair(input.substr(0, 100), input.substr(100, 100));
    } catch (const Error& e) {
        if (std::string_view(e.what()).find("can neither encode nor mark unknown") == std::string_view::npos)
            fuzz::unexpected("encoding raw bytes", e);
        return;
    }
    for (int32_t id : ids)
        if (!tok.vocab().valid_id(id)) fail("encode of raw bytes returned an id out of range");
    if (pair.ids.size() != pair.type_ids.size()) fail("a pair encoding has a type id count unlike its id count");
    for (int32_t id : pair.ids)
        if (!tok.vocab().valid_id(id)) fail("encode_pair returned an id out of range");
    if (!utf8_valid(tok.decode(ids, {.render_special = true}))) fail("decode gave invalid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    check_charsmap(input);
    const size_t nul = input.find('\0');
    const std::string_view tokenizer_json = input.substr(0, nul);
    const std::string_view config_json = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
    HfTokenizer hf;
    try {
        hf = parse_hf_tokenizer(tokenizer_json, config_json, "fuzz");
    } catch (const Error&) {
        return 0;
    } catch (const std::exception& e) {
        fuzz::unexpected("parse_hf_tokenizer", e);
    }
    // A sample of the input itself as text, with special tokens parsed.
    const std::string_view text = tokenizer_json.substr(0, 200);
    std::vector<int32_t> ids;
    std::unique_ptr<Tokenizer> tok;
    try {
        tok = Tokenizer::from_vocab(Vocab::from_spec(hf.spec));
        ids = tok->encode(text, {.add_bos = false, .add_eos = false, .parse_special = true});
    } catch (const Error& e) {
        // The only refusal left after a successful parse: text the vocabulary cannot encode at all.
        if (std::string_view(e.what()).find("can neither encode nor mark unknown") == std::string_view::npos)
            fuzz::unexpected("a parsed spec", e);
        return 0;
    }
    for (int32_t id : ids)
        if (!tok->vocab().valid_id(id)) fail("encode returned an id out of range");
    if (hf.spec.model == "bert" || hf.spec.model == "t5") check_encoder(*tok, input);
    HfTokenizer again;
    try {
        const HfTokenizerFiles files = render_hf_tokenizer(hf.spec, hf.chat_template);
        again = parse_hf_tokenizer(files.tokenizer_json, files.tokenizer_config_json, "fuzz-written");
    } catch (const std::exception& e) {
        fuzz::unexpected("writing a parsed spec back", e);
    }
    if (again.spec.tokens != hf.spec.tokens) fail("the written tokenizer.json holds other tokens");
    if (again.chat_template != hf.chat_template) fail("the written chat template differs");
    if (hf.spec.model == "gpt2") {
        auto back = Tokenizer::from_vocab(Vocab::from_spec(again.spec));
        if (back->encode(text, {.add_bos = false, .add_eos = false, .parse_special = true}) != ids)
            fail("the written byte-level tokenizer encodes differently");
    }
    return 0;
}
