// POST /tokenize and /detokenize bodies: llama-server's shapes, round trips, pieces, and a 400
// naming the field for every bad body.
#include "server/tokenize_request.h"

#include <filesystem>
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

std::unique_ptr<tokenizer::Tokenizer> load() {
    const std::string path = test::vocab_path("stories260K");
    if (!std::filesystem::exists(path)) return nullptr;
    return tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
}

#define NEED_TOKENIZER(tok) \
    auto tok = load();      \
    if (!tok) GTEST_SKIP() << "stories260K vocabulary not in ../shared"

ApiError refusal(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "not refused";
    return ApiError::internal("not refused");
}

}  // namespace

TEST(TokenizeRequest, IdsRoundTripThroughDetokenize) {
    NEED_TOKENIZER(tok);
    const json r = tokenize_response({{"content", "Once upon a time"}}, *tok);
    ASSERT_TRUE(r["tokens"].is_array());
    ASSERT_FALSE(r["tokens"].empty());
    EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(),
              tok->encode("Once upon a time", {.add_bos = false, .add_eos = false}));
    EXPECT_EQ(detokenize_response({{"tokens", r["tokens"]}}, *tok)["content"], "Once upon a time");
}

TEST(TokenizeRequest, AddSpecialAddsBos) {
    NEED_TOKENIZER(tok);
    ASSERT_GE(tok->bos(), 0);
    const json plain = tokenize_response({{"content", "hi"}}, *tok);
    const json special = tokenize_response({{"content", "hi"}, {"add_special", true}}, *tok);
    ASSERT_EQ(special["tokens"].size(), plain["tokens"].size() + (tok->vocab().add_bos() ? 1 : 0));
    if (tok->vocab().add_bos()) EXPECT_EQ(special["tokens"][0], tok->bos());
}

TEST(TokenizeRequest, PiecesConcatenateToTheText) {
    NEED_TOKENIZER(tok);
    const json r = tokenize_response({{"content", "The cat sat."}, {"with_pieces", true}}, *tok);
    std::string text;
    for (const auto& t : r["tokens"]) {
        ASSERT_TRUE(t["id"].is_number_integer());
        ASSERT_TRUE(t["piece"].is_string() || t["piece"].is_array());
        if (t["piece"].is_string()) text += t["piece"].get<std::string>();
        else
            for (const auto& b : t["piece"]) text += char(b.get<int>());
    }
    // SentencePiece pieces carry the dummy-prefix space the decoder removes.
    EXPECT_NE(text.find("cat sat."), std::string::npos) << text;
}

TEST(TokenizeRequest, EmptyContentGivesNoTokens) {
    NEED_TOKENIZER(tok);
    EXPECT_TRUE(tokenize_response({{"content", ""}}, *tok)["tokens"].empty());
    EXPECT_EQ(detokenize_response({{"tokens", json::array()}}, *tok)["content"], "");
}

TEST(TokenizeRequest, BadBodiesAre400sNamingTheField) {
    NEED_TOKENIZER(tok);
    struct Case {
        json body;
        bool tokenize;
        std::string param, code;
    } cases[] = {
        {json::array(), true, "", "invalid_type"},
        {json::object(), true, "content", "missing_required_parameter"},
        {{{"content", 5}}, true, "content", "invalid_type"},
        {{{"content", "x"}, {"add_special", "yes"}}, true, "add_special", "invalid_type"},
        {{{"content", "x"}, {"with_pieces", 1}}, true, "with_pieces", "invalid_type"},
        {json("text"), false, "", "invalid_type"},
        {json::object(), false, "tokens", "missing_required_parameter"},
        {{{"tokens", "1 2"}}, false, "tokens", "invalid_type"},
        {{{"tokens", {1, "2"}}}, false, "tokens[1]", "invalid_type"},
        {{{"tokens", {1, 2.5}}}, false, "tokens[1]", "invalid_type"},
        {{{"tokens", {-1}}}, false, "tokens[0]", "invalid_value"},
        {{{"tokens", {tok->n_vocab()}}}, false, "tokens[0]", "invalid_value"},
        {{{"tokens", {uint64_t(1) << 63}}}, false, "tokens[0]", "invalid_value"},
    };
    for (const auto& c : cases) {
        ApiError e = refusal([&] {
            if (c.tokenize) tokenize_response(c.body, *tok);
            else detokenize_response(c.body, *tok);
        });
        EXPECT_EQ(e.status, 400) << c.body.dump();
        EXPECT_EQ(e.param, c.param) << c.body.dump();
        EXPECT_EQ(e.code, c.code) << c.body.dump();
    }
}

TEST(TokenizeRequest, OtherFieldsAreRefusedNamingThem) {
    const pagoda::tokenizer::Tokenizer* tok = pagoda::test::fixture_tokenizer("stories260K");
    if (!tok) GTEST_SKIP() << "fixture not found: stories260K";
    for (const auto& [body, detok] : std::vector<std::pair<std::string, bool>>{
             {R"({"content":"a","add_bos":true})", false}, {R"({"tokens":[1],"skip_special":true})", true}}) {
        try {
            detok ? detokenize_response(json::parse(body), *tok) : tokenize_response(json::parse(body), *tok);
            FAIL() << body;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.code, "unsupported_parameter");
            EXPECT_EQ(e.param, detok ? "skip_special" : "add_bos");
        }
    }
    EXPECT_NO_THROW(tokenize_response(json::parse(R"({"content":"a","with_pieces":null})"), *tok));
}
