// Byte-level BPE pre-tokenizers: the regex splits each Hugging Face tokenizer applies before BPE,
// selected by GGUF `tokenizer.ggml.pre`. A pre-tokenizer is a sequence of PCRE2 patterns; each one
// splits every piece produced by the previous pattern into its matches and the gaps between them
// (Hugging Face's Split with behaviour "Isolated"), so no byte of the input is ever dropped.
// Patterns are compiled once (UTF + UCP, JIT when available); split() is thread-safe.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tokenizer {

// What a pre-tokenizer name implies beyond its regexes (llama.cpp's per-name vocabulary settings).
struct PreTokenizerTraits {
    bool ignore_merges = false;  // a word that is itself a token is emitted without merging
    bool add_bos = false;        // default for add_bos when GGUF does not say
    bool no_bos = false;         // the vocabulary has no BOS token (ChatGLM)
    // SentencePiece-style BPE (Gemma 4): no GPT-2 byte alphabet; spaces become U+2581 before the split,
    // merges run over raw UTF-8 characters, a character with no token falls back to <0xXX> tokens.
    bool spm_style = false;
};

struct PreTokenizerDef {
    std::vector<std::string> names;     // tokenizer.ggml.pre values that select it
    std::vector<std::string> patterns;  // applied in order
    PreTokenizerTraits traits;
};

// The definition for `name` ("" means "default"), or nullptr when pagoda does not know it.
const PreTokenizerDef* find_pre_tokenizer(std::string_view name);
// Every definition, in registry order (for mapping a regex list back to its name).
const std::vector<PreTokenizerDef>& known_pre_tokenizers();
// Every supported name, for error messages and tests.
std::vector<std::string> known_pre_tokenizer_names();

class PreTokenizer {
public:
    explicit PreTokenizer(std::string_view name);  // throws pagoda::Error for an unknown name
    PreTokenizer(std::string name, std::vector<std::string> patterns);  // custom pattern list
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    const std::string& name() const { return name_; }
    // Splits text into consecutive non-empty pieces whose concatenation is the text.
    std::vector<std::string_view> split(std::string_view text) const;

private:
    struct Compiled;
    std::string name_;
    std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace pagoda::tokenizer
