// Token types on a request (engine::Request::token_types) are an encoder embedding's input only: one
// per prompt token, each below the model's token-type rows (validate_request).
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/request_validation.h"

namespace pagoda::engine {
namespace {

model::StepModelInfo encoder_info() {
    model::StepModelInfo info;
    info.vocab_size = 100;
    info.max_context = 64;
    info.hidden_size = 8;
    info.embedding_only = true;
    info.bidirectional = true;
    info.n_token_types = 2;
    return info;
}

Request typed(std::vector<int32_t> types) {
    Request r;
    r.prompt = {1, 2, 3, 4};
    r.embedding = EmbeddingSpec{Pooling::cls, false};
    r.token_types = std::move(types);
    return r;
}

std::string refusal(const Request& r, const model::StepModelInfo& info) {
    try {
        validate_request(r, info, 64, 4, false);
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

TEST(TokenTypesValidation, AcceptsOnePerTokenBelowTheModelsTypes) {
    EXPECT_EQ(refusal(typed({0, 0, 1, 1}), encoder_info()), "");
    EXPECT_EQ(refusal(typed({}), encoder_info()), "");
}

TEST(TokenTypesValidation, RefusesByName) {
    EXPECT_NE(refusal(typed({0, 1}), encoder_info()).find("2 token types for a prompt of 4 tokens"), std::string::npos);
    EXPECT_NE(refusal(typed({0, 0, 2, 1}), encoder_info()).find("token type 2 at position 2 is out of range"),
              std::string::npos);
    EXPECT_NE(refusal(typed({0, -1, 0, 0}), encoder_info()).find("token type -1 at position 1"), std::string::npos);
    model::StepModelInfo one = encoder_info();
    one.n_token_types = 1;  // RoBERTa: type 0 only
    EXPECT_EQ(refusal(typed({0, 0, 0, 0}), one), "");
    EXPECT_NE(refusal(typed({0, 0, 1, 1}), one).find("the model has 1 token types"), std::string::npos);
    model::StepModelInfo decoder = encoder_info();
    decoder.bidirectional = false;
    decoder.embedding_only = false;
    EXPECT_NE(refusal(typed({0, 0, 1, 1}), decoder).find("an encoder embedding's input"), std::string::npos);
    Request generate = typed({0, 0, 1, 1});
    generate.embedding.reset();
    EXPECT_NE(refusal(generate, decoder).find("an encoder embedding's input"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::engine
