// Malformed or unsupported Hugging Face tokenizer files are refused with a pagoda::Error naming the
// file, the key and the problem — never a crash, never a silently different tokenizer.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "tokenizer/hf_tokenizer.h"

namespace pagoda::test {
namespace {

// A valid byte-level file; each case replaces one fragment of it.
const std::string kValid = R"({"added_tokens": [{"id": 3, "content": "<|end|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})";

std::string with(std::string_view from, std::string_view to) {
    std::string s = kValid;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
}

std::string error_of(const std::string& json, const std::string& config = "") {
    try {
        tokenizer::parse_hf_tokenizer(json, config, "models/x");
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

#define EXPECT_ERROR(json, fragment)                                                           \
    do {                                                                                      \
        const std::string what = error_of(json);                                              \
        EXPECT_NE(what.find(fragment), std::string::npos) << "got: " << what;                 \
        EXPECT_EQ(what.rfind("models/x/tokenizer.json", 0), 0u) << "names the file: " << what; \
    } while (0)

TEST(HfTokenizerErrors, TheValidBaseParses) { EXPECT_EQ(error_of(kValid), "(no error)"); }

TEST(HfTokenizerErrors, Json) {
    EXPECT_ERROR("{\"model\": ", "not valid JSON");
    EXPECT_ERROR("[1, 2]", "must be a JSON object");
    EXPECT_ERROR(with(R"("model": {)", R"("other": {)"), "model: is missing");
    EXPECT_ERROR(with(R"("vocab": {"a": 0, "b": 1, "ab": 2})", R"("vocab": [["a", 0.0]])"), "model.vocab: is a list of [piece, score]");
}

TEST(HfTokenizerErrors, Ids) {
    EXPECT_ERROR(with(R"("b": 1)", R"("b": 0)"), "id 0 is given to both");
    EXPECT_ERROR(with(R"("b": 1)", R"("b": -1)"), "negative");
    EXPECT_ERROR(with(R"("b": 1)", R"("b": 99999999999)"), "out of range");
    EXPECT_ERROR(with(R"("b": 1)", R"("b": 9000000)"), "out of range");
    EXPECT_ERROR(with(R"("b": 1)", R"("b": 1.5)"), "model.vocab.b: must be a token id");
    EXPECT_ERROR(with(R"({"id": 3,)", R"({"id": 2,)"), "id 2 is given to both");  // an added token over "ab"
    EXPECT_ERROR(with(R"("content": "<|end|>")", R"("content": "")"), "added_tokens[0].content: is empty");
    EXPECT_ERROR(with(R"("special": true)", R"("special": true, "single_word": true)"), "single_word");
}

TEST(HfTokenizerErrors, Merges) {
    EXPECT_ERROR(with(R"([["a", "b"]])", R"([["a", "zz"]])"), "model.merges[0]: 'zz' is not a token");
    EXPECT_ERROR(with(R"("ab": 2)", R"("ba": 2)"), "'ab' is not a token");  // the merge's result
    EXPECT_ERROR(with(R"([["a", "b"]])", R"(["ab"])"), "is not of the form");
    EXPECT_ERROR(with(R"([["a", "b"]])", R"([["a"]])"), "model.merges[0]: must be");
}

TEST(HfTokenizerErrors, UnsupportedKinds) {
    EXPECT_ERROR(with(R"("type": "BPE")", R"("type": "WordLevel")"), "'WordLevel' is not supported");
    EXPECT_ERROR(with(R"("type": "BPE")", R"("type": "WordPiece")"), "a WordPiece model takes a BertNormalizer");
    EXPECT_ERROR(with(R"("type": "BPE")", R"("type": "Unigram")"), "model.vocab: must be");
    EXPECT_ERROR(with(R"("type": "BPE")", R"("type": "BPE", "dropout": 0.1)"), "dropout");
    EXPECT_ERROR(with(R"("type": "BPE")", R"("type": "BPE", "end_of_word_suffix": "</w>")"), "end_of_word_suffix");
    EXPECT_ERROR(with(R"("normalizer": null)", R"("normalizer": {"type": "Lowercase"})"), "normalizer type 'Lowercase'");
    EXPECT_ERROR(with(R"("normalizer": null)", R"("normalizer": {"type": "Replace", "pattern": {"String": "a"}, "content": "b"})"),
                 "Replace of 'a' by 'b'");
    EXPECT_ERROR(with(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})",
                      R"({"type": "Whitespace"})"),
                 "pre-tokenizer type 'Whitespace'");
    EXPECT_ERROR(with(R"("add_prefix_space": false, "trim)", R"("add_prefix_space": true, "trim)"), "add_prefix_space");
    EXPECT_ERROR(with(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})",
                      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"},
                          "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false}]})"),
                 "pre_tokenizer.pretokenizers[0].behavior: Split behavior 'Removed'");
    EXPECT_ERROR(with(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})",
                      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(a"},
                          "behavior": "Isolated"}, {"type": "ByteLevel", "add_prefix_space": false}]})"),
                 "does not compile");
    EXPECT_ERROR(with(R"("post_processor": null)", R"("post_processor": {"type": "Frobnicate"})"),
                 "post-processor type 'Frobnicate'");
    EXPECT_ERROR(with(R"("post_processor": null)", R"("post_processor": {"type": "BertProcessing"})"), "post_processor.cls");
    EXPECT_ERROR(with(R"("decoder": {"type": "ByteLevel"})", R"("decoder": {"type": "WordPiece"})"),
                 "a WordPiece decoder is only supported with a WordPiece model");
    EXPECT_ERROR(with(R"("normalizer": null)", R"("normalizer": {"type": "BertNormalizer"})"), "BertNormalizer");
    EXPECT_ERROR(with(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})", "null"),
                 "without a ByteLevel pre-tokenizer");
}

TEST(HfTokenizerErrors, Config) {
    auto config_error = [](const std::string& config) { return error_of(kValid, config); };
    EXPECT_NE(config_error("{").find("models/x/tokenizer_config.json: not valid JSON"), std::string::npos);
    EXPECT_NE(config_error(R"({"bos_token": "<s>"})").find("tokenizer_config.json: bos_token: '<s>' is not a token"),
              std::string::npos);
    EXPECT_NE(config_error(R"({"eos_token": {"content": 3}})").find("eos_token.content: must be a string"), std::string::npos);
    EXPECT_NE(config_error(R"({"chat_template": [{"name": "tool_use", "template": "x"}]})").find("no template named \"default\""),
              std::string::npos);
    EXPECT_NE(config_error(R"({"chat_template": 7})").find("chat_template: must be a string or a list"), std::string::npos);
    EXPECT_NE(config_error(R"({"add_bos_token": true})").find("no BOS token is named"), std::string::npos);
    EXPECT_NE(config_error(R"({"added_tokens_decoder": {"x": {"content": "c"}}})").find("added_tokens_decoder.x: the key"),
              std::string::npos);
    EXPECT_NE(config_error(R"({"added_tokens_decoder": {"3": {"content": "<|other|>"}}})").find("id 3 is both"),
              std::string::npos);
}

TEST(HfTokenizerErrors, Folder) {
    try {
        tokenizer::read_hf_tokenizer(temp_path("no_such_hf_folder"));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
    }
}

TEST(HfTokenizerErrors, WriterRefusesInvalidUtf8) {
    tokenizer::VocabSpec spec;
    spec.model = "gpt2";
    spec.tokens = {"a", "\xff"};
    EXPECT_THROW(tokenizer::render_hf_tokenizer(spec, ""), Error);
}

}  // namespace
}  // namespace pagoda::test
