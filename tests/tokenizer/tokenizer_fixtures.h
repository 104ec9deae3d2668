// Shared helpers for the tokenizer tests: fixture vocabularies (loaded once per test binary) and
// random text generation.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::test {

// The vocabularies with llama.cpp test vectors, plus the stories260K model's own vocabulary.
inline const std::vector<std::string>& vector_vocab_names() {
    static const std::vector<std::string> names = {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon"};
    return names;
}
inline std::string vocab_path(const std::string& name) {
    if (name == "stories260K") return fixture("models/stories260K.gguf");
    return fixture("vocab/ggml-vocab-" + name + ".gguf");
}
inline std::vector<std::string> all_vocab_names() {
    auto names = vector_vocab_names();
    names.push_back("stories260K");
    return names;
}

// Loads (once) the tokenizer of a fixture vocabulary; nullptr when the fixture is absent.
inline const tokenizer::Tokenizer* fixture_tokenizer(const std::string& name) {
    static std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second.get();
    std::string path = vocab_path(name);
    if (!std::filesystem::exists(path)) return nullptr;
    auto file = gguf::File::open(path);
    auto& slot = cache[name];
    slot = tokenizer::Tokenizer::from_gguf(*file);
    return slot.get();
}

// Random valid UTF-8 drawn from a mix that stresses tokenizers: ASCII words and punctuation, runs of
// spaces, tabs and newlines, digits, Latin-1 and other accented letters, combining marks, Cyrillic,
// CJK, Hangul, emoji and other 4-byte characters.
inline std::string random_unicode_text(std::mt19937& rng, size_t n_chars) {
    static const std::vector<std::pair<char32_t, char32_t>> ranges = {
        {'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {' ', ' '}, {' ', ' '}, {' ', ' '}, {'\n', '\n'}, {'\t', '\t'},
        {'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}, {0xA0, 0xFF}, {0x100, 0x17F}, {0x300, 0x36F},
        {0x400, 0x4FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0x3040, 0x30FF}, {0x1F600, 0x1F64F},
        {0x2000, 0x206F}, {0x10000, 0x1FFFF}, {'\r', '\r'},
    };
    std::uniform_int_distribution<size_t> pick(0, ranges.size() - 1);
    std::string out;
    for (size_t i = 0; i < n_chars; ++i) {
        auto [lo, hi] = ranges[pick(rng)];
        char32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        tokenizer::utf8_append(out, cp);
    }
    return out;
}

}  // namespace pagoda::test
