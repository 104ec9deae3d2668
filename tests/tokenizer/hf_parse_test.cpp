// Hugging Face tokenizer files in the structure the families ship (tests/data/hf_tokenizer, and
// small inline texts) read into the expected VocabSpec: kind, pre-tokenizer, special ids, token
// types, strip flags, BOS/EOS defaults and the chat template's forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vector_file.h"

namespace pagoda::test {
namespace {

using tokenizer::HfTokenizer;
using tokenizer::TokenType;

std::string data_dir(const std::string& folder) { return source_dir() + "/tests/data/hf_tokenizer/" + folder; }
HfTokenizer read(const std::string& folder) { return tokenizer::read_hf_tokenizer(data_dir(folder)); }
HfTokenizer read_dir(const std::string& dir) { return tokenizer::read_hf_tokenizer(dir); }
TokenType type_of(const HfTokenizer& hf, int64_t id) { return TokenType(hf.spec.token_types.at(size_t(id))); }

TEST(HfTokenizerParse, Llama31ByteLevel) {
    const HfTokenizer hf = read("llama3.1");
    EXPECT_EQ(hf.spec.model, "gpt2");
    EXPECT_EQ(hf.spec.pre, "llama3") << "Llama 3's Split regex with ignore_merges is the llama3 pre-tokenizer";
    EXPECT_TRUE(hf.spec.pre_patterns.empty());
    EXPECT_EQ(hf.spec.ignore_merges, std::optional<bool>(true));
    EXPECT_EQ(hf.spec.tokens.size(), 291u);
    EXPECT_EQ(hf.spec.tokens[0x20], "\xC4\xA0");  // Ġ: byte 0x20
    EXPECT_EQ(hf.spec.merges.front(), "u s") << "pair-form merges become 'left right'";
    EXPECT_EQ(hf.spec.bos, std::optional<int64_t>(284));
    EXPECT_EQ(hf.spec.eos, std::optional<int64_t>(289));
    EXPECT_EQ(hf.spec.add_bos, std::optional<bool>(true));
    EXPECT_EQ(type_of(hf, 286), TokenType::control);
    EXPECT_EQ(type_of(hf, 258), TokenType::normal);
    // The list-of-named-templates form: "default" is picked, not "tool_use".
    EXPECT_EQ(hf.chat_template, tokenizer::read_text_file(source_dir() + "/tests/data/chat_templates/llama3.1.jinja"));
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    EXPECT_EQ(tok->encode("Hello user"), (std::vector<int32_t>{284, 280, ' ', 258})) << "BOS from the post-processor";
}

TEST(HfTokenizerParse, Qwen3StringMergesAndNfc) {
    const HfTokenizer hf = read("qwen3");
    EXPECT_EQ(hf.spec.model, "gpt2");
    EXPECT_EQ(hf.spec.pre, "qwen2");
    EXPECT_EQ(hf.spec.add_bos, std::optional<bool>(false)) << "no TemplateProcessing, no add_bos_token";
    EXPECT_EQ(hf.spec.eos, std::optional<int64_t>(286));
    EXPECT_EQ(hf.spec.merges.size(), 28u);  // each word's prefixes, "\n\n"
    EXPECT_EQ(hf.chat_template, tokenizer::read_text_file(source_dir() + "/tests/data/chat_templates/qwen3.jinja"));
}

TEST(HfTokenizerParse, MistralSentencePiece) {
    const HfTokenizer hf = read("mistral");
    EXPECT_EQ(hf.spec.model, "llama");
    EXPECT_EQ(hf.spec.add_space_prefix, std::optional<bool>(true)) << "Prepend ▁ in the normalizer";
    EXPECT_EQ(hf.spec.bos, std::optional<int64_t>(1)) << "bos_token as an {\"content\": …} object";
    EXPECT_EQ(hf.spec.unk, std::optional<int64_t>(0));
    EXPECT_EQ(type_of(hf, 0), TokenType::unknown);
    EXPECT_EQ(type_of(hf, 1), TokenType::control);
    EXPECT_EQ(type_of(hf, 3 + 0x41), TokenType::byte);
    EXPECT_EQ(type_of(hf, 337), TokenType::control);  // [INST]
    // Scores replay the merge order: the first merge's result scores highest (0), unmerged pieces lowest.
    const auto& s = hf.spec.scores;
    EXPECT_EQ(s[276], 0.0f);  // "us" = "u s", the first merge
    EXPECT_LT(s[278], s[277]);
    EXPECT_EQ(s[261], s[0]) << "single characters are made by no merge";
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    EXPECT_EQ(tok->encode("Hello user!"), (std::vector<int32_t>{1, 332, 306, 3 + '!'}));
    EXPECT_EQ(tok->decode({1, 332, 306, 3 + '!'}), "Hello user!");
}

TEST(HfTokenizerParse, Phi3MetaspaceAndStrip) {
    const HfTokenizer hf = read("phi3");
    EXPECT_EQ(hf.spec.model, "llama");
    EXPECT_EQ(hf.spec.add_space_prefix, std::optional<bool>(true)) << "Metaspace prepend_scheme first";
    std::vector<int64_t> rstrip = hf.spec.rstrip_ids;
    std::sort(rstrip.begin(), rstrip.end());
    EXPECT_EQ(rstrip, (std::vector<int64_t>{338, 339, 340, 341}));
    EXPECT_TRUE(hf.spec.lstrip_ids.empty());
    EXPECT_EQ(hf.spec.eos, std::optional<int64_t>(337));
}

TEST(HfTokenizerParse, Gemma3NoPrefixSpace) {
    const HfTokenizer hf = read("gemma3");
    EXPECT_EQ(hf.spec.add_space_prefix, std::optional<bool>(false)) << "Replace only, no Prepend";
    EXPECT_EQ(hf.spec.bos, std::optional<int64_t>(337));
    EXPECT_EQ(hf.spec.pad, std::optional<int64_t>(339));
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    EXPECT_EQ(tok->encode("Hi Bye", {.add_bos = false}), (std::vector<int32_t>{296, 335}));
}

// A byte-level file whose regex is in no registry entry still runs, split by that regex.
TEST(HfTokenizerParse, UnknownRegexIsUsedAsIs) {
    const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, ",": 3},
        "merges": [["a", "b"]]},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "[ab]{1,1}"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
      "decoder": {"type": "ByteLevel"}})";
    const HfTokenizer hf = tokenizer::parse_hf_tokenizer(json, "", "inline");
    EXPECT_EQ(hf.spec.pre_patterns, (std::vector<std::string>{"[ab]{1,1}"}));
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    EXPECT_EQ(tok->encode("ab,"), (std::vector<int32_t>{0, 1, 3})) << "the regex keeps a and b apart";
    // The same vocabulary with GPT-2's regex (a bare ByteLevel) merges them.
    const std::string gpt2 = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, ",": 3, "Ġ": 4},
        "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}})";
    const HfTokenizer g = tokenizer::parse_hf_tokenizer(gpt2, R"({"bos_token": null, "eos_token": ","})", "inline");
    EXPECT_EQ(g.spec.pre, "gpt-2");
    EXPECT_EQ(g.spec.eos, std::optional<int64_t>(3));
    auto gt = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(g.spec));
    EXPECT_EQ(gt->encode("ab, a"), (std::vector<int32_t>{2, 3, 4, 0}));
}

// The writer's output is what the reader reads, and writing it again gives the same text.
TEST(HfTokenizerParse, WriterIsStable) {
    const HfTokenizer hf = read("mistral");
    const auto files = tokenizer::render_hf_tokenizer(hf.spec, hf.chat_template);
    const HfTokenizer again = tokenizer::parse_hf_tokenizer(files.tokenizer_json, files.tokenizer_config_json, "written");
    EXPECT_EQ(again.spec.tokens, hf.spec.tokens);
    EXPECT_EQ(again.spec.token_types, hf.spec.token_types);
    EXPECT_EQ(again.chat_template, hf.chat_template);
    const auto twice = tokenizer::render_hf_tokenizer(again.spec, again.chat_template);
    EXPECT_EQ(twice.tokenizer_json, files.tokenizer_json);
    EXPECT_EQ(twice.tokenizer_config_json, files.tokenizer_config_json);
    EXPECT_NE(files.tokenizer_json.find("\"byte_fallback\": true"), std::string::npos);
    EXPECT_NE(files.tokenizer_json.find("\"type\": \"Prepend\""), std::string::npos);
}

}  // namespace
}  // namespace pagoda::test

namespace pagoda::test {
namespace {

// Newer transformers save the template beside the config: chat_template.jinja, or chat_template.json.
TEST(HfTokenizerParse, ChatTemplateFilesBesideTheConfig) {
    const std::string dir = temp_path("hf_template_files");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(data_dir("qwen3") + "/tokenizer.json", dir + "/tokenizer.json");
    EXPECT_EQ(read_dir(dir).chat_template, "") << "no config, no template";
    {
        std::ofstream(dir + "/chat_template.json") << R"({"chat_template": "{{ messages[0].content }}"})";
    }
    EXPECT_EQ(read_dir(dir).chat_template, "{{ messages[0].content }}");
    {
        std::ofstream(dir + "/chat_template.jinja") << "{{ bos_token }}";
    }
    EXPECT_EQ(read_dir(dir).chat_template, "{{ bos_token }}") << "the .jinja file comes first";
    {
        std::ofstream(dir + "/tokenizer_config.json") << R"({"chat_template": "config"})";
    }
    EXPECT_EQ(read_dir(dir).chat_template, "config") << "tokenizer_config.json's own template wins";
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda::test

namespace pagoda::test {
namespace {

// Without tokenizer_config.json or a post-processor nothing names BOS/EOS: there are none (not
// llama.cpp's GGUF defaults, which would make BPE id 11 — here "," — end every generation).
TEST(HfTokenizerParse, UnnamedSpecialTokensDoNotExist) {
    std::string vocab = R"("Ġ": 0)";
    for (int i = 1; i < 20; ++i) vocab += ", \"" + std::string(1, char('a' + i)) + "\": " + std::to_string(i);
    const std::string json = R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
        "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})";
    const HfTokenizer hf = tokenizer::parse_hf_tokenizer(json, "", "inline");
    EXPECT_EQ(hf.spec.eos, std::optional<int64_t>(-1));
    auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::Vocab::from_spec(hf.spec));
    EXPECT_EQ(tok->eos(), tokenizer::kNoToken);
    EXPECT_EQ(tok->bos(), tokenizer::kNoToken);
    EXPECT_FALSE(tok->is_eog(11));
    // The same through GGUF keys: -1 is written as "none" and read back as none.
    gguf::Writer writer;
    for (const auto& [k, v] : tokenizer::vocab_spec_gguf_keys(hf.spec, "")) writer.set(k, v);
    writer.write(temp_path("hf_unnamed.gguf"));
    auto from_gguf = tokenizer::Tokenizer::from_gguf(*gguf::File::open(temp_path("hf_unnamed.gguf")));
    std::filesystem::remove(temp_path("hf_unnamed.gguf"));
    EXPECT_EQ(from_gguf->eos(), tokenizer::kNoToken);
    EXPECT_FALSE(from_gguf->is_eog(11));
}

}  // namespace
}  // namespace pagoda::test
