// Gemma 4's tokenizer model ("gemma4", llama.cpp's BPE vocabulary with the GEMMA4 pre-type): spaces
// become U+2581, the text splits only into runs of newlines and the rest, merges apply lowest rank
// first over raw UTF-8 characters, a newline run that is a token stays whole, and a character with no
// token falls back to its <0xXX> byte tokens. Hand-worked ids on a small vocabulary in Gemma 4's
// layout, loaded from the spec and from a GGUF file, plus round trips and special tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using namespace pagoda::tokenizer;

constexpr int32_t kBytes = 6;  // <0x00> is id 6
int32_t byte_id(uint8_t b) { return kBytes + b; }

// <pad> 0, <eos> 1, <bos> 2, <unk> 3, <|turn> 4, <turn|> 5, <0x00>..<0xFF> 6..261, then the pieces.
VocabSpec gemma4_spec() {
    VocabSpec s;
    s.model = "gemma4";
    s.pre = "default";  // ignored: the gemma4 model always takes the gemma4 pre-tokenizer
    s.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>"};
    s.token_types = {3, 3, 3, 2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        s.tokens.push_back(fmt::format("<0x{:02X}>", b));
        s.token_types.push_back(6);
    }
    for (const char* t : {"\xE2\x96\x81", "h", "e", "l", "o", "\n", "\n\n", "he", "ll", "hell", "hello",
                          "\xE2\x96\x81hello", "\xC3\xA9", "\xE2\x96\x81\xE2\x96\x81"}) {
        s.tokens.push_back(t);  // 262 ...
        s.token_types.push_back(1);
    }
    s.merges = {"h e", "l l", "he ll", "hell o", "\xE2\x96\x81 hello", "\xE2\x96\x81 \xE2\x96\x81"};
    s.pad = 0;
    s.eos = 1;
    s.bos = 2;
    s.unk = 3;
    return s;
}
constexpr int32_t kSpace = 262, kH = 263, kNl = 267, kNlNl = 268, kHello = 272, kSpaceHello = 273, kEAcute = 274;

std::vector<int32_t> ids(const Tokenizer& t, std::string_view text) {
    return t.encode(text, {.add_bos = false, .add_eos = false});
}

void expect_hand_worked(const Tokenizer& t) {
    EXPECT_EQ(t.vocab().pre(), "gemma4");
    EXPECT_EQ(ids(t, "hello"), (std::vector<int32_t>{kHello}));
    EXPECT_EQ(ids(t, " hello"), (std::vector<int32_t>{kSpaceHello}));  // no dummy prefix: add_space_prefix is off
    // "▁ hello" (rank 4) merges before "▁ ▁" (rank 5), so the second space joins the word.
    EXPECT_EQ(ids(t, "hello  hello"), (std::vector<int32_t>{kHello, kSpace, kSpaceHello}));
    // "\n\n" is a token although no merge builds it; "\n\n\n" is not, and no merge joins newlines.
    EXPECT_EQ(ids(t, "hello\n\nhello"), (std::vector<int32_t>{kHello, kNlNl, kHello}));
    EXPECT_EQ(ids(t, "\n\n\n"), (std::vector<int32_t>{kNl, kNl, kNl}));
    // No merge crosses a newline: "he" + "\n" + "llo" (ll merges, "ll o" is no merge).
    EXPECT_EQ(ids(t, "he\nllo"), (std::vector<int32_t>{269, kNl, 270, 266}));
    // A character with a token, and ones without (ü: C3 BC; 😀: F0 9F 98 80) as byte tokens.
    EXPECT_EQ(ids(t, "h\xC3\xA9"), (std::vector<int32_t>{kH, kEAcute}));
    EXPECT_EQ(ids(t, "h\xC3\xBC"), (std::vector<int32_t>{kH, byte_id(0xC3), byte_id(0xBC)}));
    EXPECT_EQ(ids(t, "\xF0\x9F\x98\x80"),
              (std::vector<int32_t>{byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
    // BOS is added by default; EOS is not.
    EXPECT_EQ(t.encode("hello"), (std::vector<int32_t>{2, kHello}));
    // Turn markers are control tokens when parsing specials, text otherwise; <turn|> ends generation.
    EXPECT_EQ(t.encode("<|turn>hello<turn|>", {.add_bos = false, .parse_special = true}),
              (std::vector<int32_t>{4, kHello, 5}));
    EXPECT_EQ(ids(t, "<|turn>").front(), byte_id('<'));
    EXPECT_TRUE(t.vocab().is_eog(5));
    EXPECT_TRUE(t.vocab().is_eog(1));
    EXPECT_EQ(t.vocab().eot(), 5);
    // Decoding unescapes U+2581 and joins byte tokens; control tokens render only when asked.
    const std::vector<int32_t> seq = {2, kSpaceHello, kSpace, kSpaceHello, kNlNl, kH, byte_id(0xC3), byte_id(0xBC), 5};
    EXPECT_EQ(t.decode(seq), " hello  hello\n\nh\xC3\xBC");
    EXPECT_EQ(t.decode(seq, {.render_special = true}), "<bos> hello  hello\n\nh\xC3\xBC<turn|>");
}

TEST(Gemma4Tokenizer, HandWorkedIdsFromTheSpec) {
    expect_hand_worked(*Tokenizer::from_vocab(Vocab::from_spec(gemma4_spec())));
}

TEST(Gemma4Tokenizer, HandWorkedIdsFromAGgufFile) {
    const VocabSpec s = gemma4_spec();
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("gemma4"));
    w.set("tokenizer.ggml.model", gguf::Value::string("gemma4"));
    w.set("tokenizer.ggml.tokens", gguf::Value::strings(s.tokens));
    std::vector<int32_t> types(s.token_types.begin(), s.token_types.end());
    w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
    w.set("tokenizer.ggml.merges", gguf::Value::strings(s.merges));
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(2));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(1));
    w.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(3));
    w.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0));
    w.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(false));
    const std::string path = temp_path("gemma4_tokenizer.gguf");
    w.write(path);
    expect_hand_worked(*Tokenizer::from_gguf(*gguf::File::open(path)));
}

TEST(Gemma4Tokenizer, NoDefaultIdsAndMergesAreRequired) {
    VocabSpec s = gemma4_spec();
    s.bos.reset();
    s.eos.reset();
    const Vocab v = Vocab::from_spec(s);
    EXPECT_EQ(v.bos(), kNoToken);  // llama.cpp gives the gemma4 model no default ids
    EXPECT_EQ(v.eos(), kNoToken);
    EXPECT_FALSE(v.add_bos());     // nothing to add

    gguf::Writer w;
    w.set("tokenizer.ggml.model", gguf::Value::string("gemma4"));
    w.set("tokenizer.ggml.tokens", gguf::Value::strings(s.tokens));
    const std::string path = temp_path("gemma4_tokenizer_no_merges.gguf");
    w.write(path);
    try {
        Vocab::from_gguf(*gguf::File::open(path));
        FAIL() << "loaded without merges";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges is missing"), std::string::npos) << e.what();
    }
}

TEST(Gemma4Tokenizer, NoTokenizerJsonFormYet) {
    try {
        render_hf_tokenizer(gemma4_spec(), "");
        FAIL() << "rendered";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'gemma4' tokenizer model has no tokenizer.json form"), std::string::npos) << e.what();
    }
}

TEST(Gemma4Tokenizer, DecodeOfEncodeIsTheText) {
    const auto t = Tokenizer::from_vocab(Vocab::from_spec(gemma4_spec()));
    for (std::string_view text : {"", " ", "   ", " leading", "trailing  ", "a\nb", "\n", "\n\n\n\n", "\r\n\t x",
                                  "hello world\n\n  hello", "h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC",
                                  "e\xCC\x81 literal", "<|turn>not special<turn|>", "\t\t\n \n"}) {
        const std::vector<int32_t> enc = ids(*t, text);
        for (int32_t id : enc) EXPECT_NE(id, 3) << "unknown token for '" << text << "'";
        EXPECT_EQ(t->decode(enc), text);
    }
    // The one loss, as in SentencePiece: a literal U+2581 in the text is a space once encoded.
    EXPECT_EQ(ids(*t, "\xE2\x96\x81hello"), (std::vector<int32_t>{kSpaceHello}));
    EXPECT_EQ(ids(*t, "a \xE2\x96\x81" "b"), (std::vector<int32_t>{byte_id('a'), 275, byte_id('b')}));
    EXPECT_EQ(t->decode(ids(*t, "a \xE2\x96\x81" "b")), "a  b");
}

// Gemma 4's thinking and tool-call markers are control tokens in its files; they render as text so
// the reply parsers see them, and <|tool_response> (written after the calls) ends generation.
TEST(Gemma4Tokenizer, ReplyMarkersRenderAndToolResponseEndsGeneration) {
    VocabSpec s = gemma4_spec();
    const std::vector<std::string> markers = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>",
                                              "<|tool_response>", "<tool_response|>"};
    const auto first = int32_t(s.tokens.size());
    for (const std::string& m : markers) {
        s.tokens.push_back(m);
        s.token_types.push_back(3);  // control, as the converter writes Gemma 4's special tokens
    }
    const auto t = Tokenizer::from_vocab(Vocab::from_spec(s));
    const std::vector<int32_t> reply = {first, kHello, first + 1, first + 2, kH, first + 4, kHello, first + 4, first + 3};
    EXPECT_EQ(t->decode(reply), "<|channel>hello<channel|><|tool_call>h<|\"|>hello<|\"|><tool_call|>");
    EXPECT_EQ(t->decode({first + 5, first + 6}), "");  // the tool response markers stay control tokens
    EXPECT_TRUE(t->vocab().is_eog(first + 5));
    EXPECT_FALSE(t->vocab().is_eog(first + 2));
    EXPECT_FALSE(t->vocab().is_eog(first + 6));
    // Without Gemma 4's tool-call markers the rule does not apply: <|channel> stays a control token.
    VocabSpec plain = gemma4_spec();
    plain.tokens.push_back("<|channel>");
    plain.token_types.push_back(3);
    EXPECT_EQ(Tokenizer::from_vocab(Vocab::from_spec(plain))->decode({first}), "");
}

}  // namespace
}  // namespace pagoda::test
