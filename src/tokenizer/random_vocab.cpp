#include "tokenizer/random_vocab.h"

#include <string>
#include <unordered_set>

#include "core/error.h"

namespace pagoda::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

// splitmix64: the same numbers on every platform.
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return size_t(next() % n); }
};

std::string random_word(Rng& rng, size_t min_len, size_t max_len) {
    std::string w;
    const size_t len = min_len + rng.below(max_len - min_len + 1);
    for (size_t i = 0; i < len; ++i) w += kLetters[rng.below(kLetters.size())];
    return w;
}

void check_size(int64_t n_vocab) {
    if (n_vocab < 128 || n_vocab > (1 << 22)) fail("a synthetic encoder vocabulary needs 128..4194304 tokens, got {}", n_vocab);
}

// Fills spec.tokens up to n_vocab with distinct texts made by `make`.
template <class Make>
void fill(VocabSpec& spec, int64_t n_vocab, std::unordered_set<std::string>& seen, Make make) {
    for (size_t tries = 0; int64_t(spec.tokens.size()) < n_vocab; ++tries) {
        if (tries > size_t(n_vocab) * 64) fail("could not make {} distinct synthetic tokens", n_vocab);
        std::string t = make();
        if (seen.insert(t).second) spec.tokens.push_back(std::move(t));
    }
}

}  // namespace

VocabSpec make_random_wordpiece_spec(int64_t n_vocab, uint64_t seed) {
    check_size(n_vocab);
    Rng rng{seed};
    VocabSpec spec;
    spec.model = "bert";
    spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    spec.token_types = {int64_t(TokenType::control), int64_t(TokenType::unknown), int64_t(TokenType::control),
                        int64_t(TokenType::control), int64_t(TokenType::control)};
    std::unordered_set<std::string> seen(spec.tokens.begin(), spec.tokens.end());
    for (std::string_view chars : {kLetters, kDigits, kPunctuation})
        for (char c : chars) spec.tokens.emplace_back(1, c);
    for (std::string_view chars : {kLetters, kDigits})
        for (char c : chars) spec.tokens.push_back("##" + std::string(1, c));
    seen.insert(spec.tokens.begin(), spec.tokens.end());
    fill(spec, n_vocab, seen, [&] { return (rng.below(3) == 0 ? "##" : "") + random_word(rng, 2, 7); });
    spec.token_types.resize(spec.tokens.size(), int64_t(TokenType::normal));
    spec.pad = 0, spec.unk = 1, spec.cls = spec.bos = 2, spec.sep = 3, spec.mask = 4, spec.eos = -1;
    spec.add_bos = true, spec.add_sep = true, spec.add_eos = false;
    spec.word_prefix = "";
    spec.continuing_prefix = "##";
    spec.lowercase = true;
    spec.strip_accents = true;
    return spec;
}

VocabSpec make_random_unigram_spec(int64_t n_vocab, uint64_t seed) {
    check_size(n_vocab);
    Rng rng{seed};
    VocabSpec spec;
    spec.model = "t5";
    spec.tokens = {"<s>", "<pad>", "</s>", "<unk>", std::string(kSpace)};
    spec.token_types = {int64_t(TokenType::control), int64_t(TokenType::control), int64_t(TokenType::control),
                        int64_t(TokenType::unknown), int64_t(TokenType::normal)};
    std::unordered_set<std::string> seen(spec.tokens.begin(), spec.tokens.end());
    for (std::string_view chars : {kLetters, kDigits, kPunctuation})
        for (char c : chars) spec.tokens.emplace_back(1, c);
    for (char c : kLetters) spec.tokens.push_back(std::string(kSpace) + c);
    seen.insert(spec.tokens.begin(), spec.tokens.end());
    fill(spec, n_vocab, seen, [&] { return (rng.below(2) == 0 ? std::string(kSpace) : std::string()) + random_word(rng, 2, 7); });
    spec.token_types.resize(spec.tokens.size(), int64_t(TokenType::normal));
    spec.scores.assign(spec.tokens.size(), 0.0f);
    for (size_t i = 4; i < spec.scores.size(); ++i) spec.scores[i] = -float(1 + rng.below(1500)) / 100.0f;
    spec.bos = 0, spec.pad = 1, spec.eos = 2, spec.unk = 3;
    spec.add_bos = true, spec.add_eos = true;
    spec.add_space_prefix = true;
    // tokenizer.json's Metaspace (what XLM-R ships), so the folder gen-model writes says exactly this.
    spec.prepend_scheme = "always";
    spec.split_words = true;
    return spec;
}

}  // namespace pagoda::tokenizer
