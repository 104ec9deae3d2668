#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "core/error.h"

namespace pagoda::tokenizer {

namespace {

// The regexes below are the ones in each model's Hugging Face tokenizer.json (their Split and
// ByteLevel steps, in order); Digits(individual_digits) steps are written as \p{N} / \p{N}+ splits.
// PCRE2 supports the lookaheads and scoped (?i:...) groups they use, so they are taken verbatim.

// GPT-2's ByteLevel regex.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k style): case-insensitive contractions, numbers in groups of up to 3.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tekken (Mistral NeMo) and GPT-4o (o200k): case-aware words.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM family: words with an optional leading space, cut at whitespace and sentence punctuation.
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
// CJK ideographs and Hangul (DeepSeek): U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF.
constexpr const char* kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

const std::vector<PreTokenizerDef>& registry() {
    static const std::vector<PreTokenizerDef> defs = {
        // llama.cpp's fallback for BPE files without a named pre-tokenizer.
        {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, {}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
         {kLlama3},
         {.ignore_merges = true, .add_bos = true}},
        // Gemma 4 (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): runs of newlines apart from everything else.
        {{"gemma4"}, {R"([^\n]+|[\n]+)"}, {.add_bos = true, .spm_style = true}},
        {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}, {}},
        {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}, {kQwen2}, {}},
        {{"deepseek-llm"},
         {R"([\r\n])",
          // Cased letters of many scripts (written as code points: several of them change under NFC).
          R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
          R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
          R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
          R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
          R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
          R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
          R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
          R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
          R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
          R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
          R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
          R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
          R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
          R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+$)",
          kCjkHangul, R"(\p{N}+)"},
         {}},
        {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, {}},
        {{"deepseek-v3"},
         {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
          R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
         {}},
        // Falcon: Punctuation(contiguous), ByteLevel, then groups of three digits.
        {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, {}},
        {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "roberta-bpe", "gigachat", "jina-es", "jina-de",
          "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code"},
         {kGpt2},
         {}},
        // Digits(individual_digits=true) before the GPT-2 split.
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
         {R"(\p{N})", kGpt2},
         {}},
        {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}, {}},
        {{"viking"}, {kBloom, R"(\p{N})"}, {}},
        {{"tekken"}, {kTekken}, {.ignore_merges = true, .add_bos = true}},
        {{"gpt-4o", "llama4"}, {kGpt4o}, {}},
    };
    return defs;
}

}  // namespace

const PreTokenizerDef* find_pre_tokenizer(std::string_view name) {
    for (const auto& def : registry())
        for (const auto& n : def.names)
            if (n == name) return &def;
    return nullptr;
}

const std::vector<PreTokenizerDef>& known_pre_tokenizers() { return registry(); }

std::vector<std::string> known_pre_tokenizer_names() {
    std::vector<std::string> names;
    for (const auto& def : registry())
        for (const auto& n : def.names)
            if (!n.empty()) names.push_back(n);
    return names;
}

struct PreTokenizer::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

namespace {
// Per-thread match state: match data sized for our patterns and a JIT stack roomy enough for long
// runs of repeated classes (the 32 KiB default can run out on megabyte-long whitespace runs).
struct MatchState {
    pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    MatchState() {
        if (stack) pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~MatchState() {
        pcre2_match_data_free(data);
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(stack);
    }
};
MatchState& match_state() {
    thread_local MatchState state;
    return state;
}
}  // namespace

namespace {
const std::vector<std::string>& patterns_named(std::string_view name) {
    const PreTokenizerDef* def = find_pre_tokenizer(name);
    if (!def) fail("unknown BPE pre-tokenizer '{}'", name);
    return def->patterns;
}
}  // namespace

PreTokenizer::PreTokenizer(std::string_view name)
    : PreTokenizer(name.empty() ? std::string("default") : std::string(name), patterns_named(name)) {}

PreTokenizer::PreTokenizer(std::string name, std::vector<std::string> patterns) : name_(std::move(name)) {
    for (const auto& pattern : patterns) {
        int error = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(error, msg, sizeof msg);
            fail("pre-tokenizer '{}': pattern '{}' does not compile at offset {}: {}", name_, pattern, offset,
                 reinterpret_cast<const char*>(msg));
        }
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
        auto compiled = std::make_unique<Compiled>();
        compiled->code = code;
        regexes_.push_back(std::move(compiled));
    }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);
    MatchState& state = match_state();
    std::vector<std::string_view> next;
    for (const auto& regex : regexes_) {
        next.clear();
        for (std::string_view piece : pieces) {
            auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t pos = 0, gap_start = 0;
            while (pos < piece.size()) {
                int rc = pcre2_match(regex->code, subject, piece.size(), pos, 0, state.data, state.context);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    fail("pre-tokenizer '{}': regex match failed: {}", name_, reinterpret_cast<const char*>(msg));
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
                size_t start = ov[0], end = ov[1];
                if (end == start) {  // an empty match: step over one character and keep searching
                    pos = start + 1;
                    while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
                    continue;
                }
                if (start > gap_start) next.push_back(piece.substr(gap_start, start - gap_start));
                next.push_back(piece.substr(start, end - start));
                gap_start = pos = end;
            }
            if (gap_start < piece.size()) next.push_back(piece.substr(gap_start));
        }
        pieces.swap(next);
    }
    return pieces;
}

}  // namespace pagoda::tokenizer
