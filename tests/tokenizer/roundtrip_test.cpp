// Randomised invariants on every fixture vocabulary: decode(encode(x)) == x for valid UTF-8 text, and
// the streaming decoder's deltas concatenate to the whole-sequence decode on random id streams while
// never ending inside a UTF-8 character.
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer_fixtures.h"

namespace pagoda::test {
namespace {

using tokenizer::EncodeOptions;

bool is_valid_utf8(std::string_view s) { return tokenizer::utf8_sanitize(s) == s; }

class TokenizerRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerRoundTrip, DecodeOfEncodeIsIdentity) {
    PAGODA_REQUIRE_FIXTURE(vocab_path(GetParam()));
    const tokenizer::Tokenizer* tok = fixture_tokenizer(GetParam());
    std::mt19937 rng(1234);
    for (int i = 0; i < 300; ++i) {
        std::string text = random_unicode_text(rng, 1 + rng() % 60);
        auto ids = tok->encode(text, EncodeOptions{.add_bos = false, .add_eos = false});
        ASSERT_EQ(tok->decode(ids), text) << GetParam() << " iteration " << i;
        // With BOS/EOS added they decode to nothing.
        auto with_specials = tok->encode(text, EncodeOptions{.add_bos = tok->bos() >= 0, .add_eos = tok->eos() >= 0});
        ASSERT_EQ(tok->decode(with_specials), text) << GetParam() << " iteration " << i;
    }
}

TEST_P(TokenizerRoundTrip, StreamingMatchesWholeDecode) {
    PAGODA_REQUIRE_FIXTURE(vocab_path(GetParam()));
    const tokenizer::Tokenizer* tok = fixture_tokenizer(GetParam());
    std::mt19937 rng(99);
    std::uniform_int_distribution<int32_t> any_id(0, tok->n_vocab() - 1);
    for (int i = 0; i < 200; ++i) {
        std::vector<int32_t> ids;
        if (i % 2 == 0) {
            // Tokens of real text, which splits multi-byte characters across byte tokens.
            ids = tok->encode(random_unicode_text(rng, 1 + rng() % 40), EncodeOptions{.add_bos = true});
        } else {
            for (int k = 0, n = 1 + rng() % 30; k < n; ++k) ids.push_back(any_id(rng));
        }
        for (bool render : {false, true}) {
            tokenizer::StreamDecoder stream(*tok, {.render_special = render});
            std::string joined;
            for (int32_t id : ids) {
                std::string delta = stream.feed(id);
                ASSERT_TRUE(is_valid_utf8(delta)) << "delta is not valid UTF-8";
                joined += delta;
            }
            std::string rest = stream.flush();
            ASSERT_TRUE(is_valid_utf8(rest));
            joined += rest;
            ASSERT_EQ(joined, tok->decode(ids, {.render_special = render})) << GetParam() << " stream " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllVocabularies, TokenizerRoundTrip, ::testing::ValuesIn(all_vocab_names()),
                         [](const auto& info) {
                             std::string name = info.param;
                             for (char& c : name)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             return name;
                         });

TEST(StreamDecoder, HoldsPartialCharacterUntilComplete) {
    PAGODA_REQUIRE_FIXTURE(vocab_path("llama-spm"));
    const tokenizer::Tokenizer* tok = fixture_tokenizer("llama-spm");
    const auto& v = tok->vocab();
    // "é" is C3 A9: the first byte alone must not be emitted.
    tokenizer::StreamDecoder stream(*tok);
    EXPECT_EQ(stream.feed(v.byte_token(0xC3)), "");
    EXPECT_EQ(stream.feed(v.byte_token(0xA9)), "\xC3\xA9");
    // An unfinished sequence is released as U+FFFD only at flush.
    EXPECT_EQ(stream.feed(v.byte_token(0xE4)), "");
    EXPECT_EQ(stream.feed(v.byte_token(0xB8)), "");
    EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
    EXPECT_EQ(stream.flush(), "");
    // A byte that can never start a character is replaced at once, and what follows is kept.
    stream.reset();
    EXPECT_EQ(stream.feed(v.byte_token(0xFF)), "\xEF\xBF\xBD");
    // The SentencePiece dummy space is stripped once at the start of a stream, after BOS too.
    stream.reset();
    EXPECT_EQ(stream.feed(tok->bos()), "");
    EXPECT_EQ(stream.feed(15043), "Hello");  // "▁Hello"
    EXPECT_EQ(stream.feed(3186), " world");  // "▁world"
}

}  // namespace
}  // namespace pagoda::test
