// POST /v1/embeddings bodies: every accepted input shape, and a 400 naming the field for the rest;
// the response's base64 is the floats' little-endian bytes.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/embedding_response.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::string refused_param(const json& body) {
    try {
        parse_embedding_request(body);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        return e.param;
    }
    return "(accepted)";
}

TEST(EmbeddingRequest, AcceptsEveryInputShape) {
    auto p = parse_embedding_request(json{{"input", "hello"}, {"model", "m"}, {"user", "u"}});
    ASSERT_EQ(p.inputs.size(), 1u);
    EXPECT_EQ(std::get<std::string>(p.inputs[0]), "hello");
    EXPECT_EQ(p.model, "m");
    EXPECT_EQ(p.encoding, EmbeddingEncoding::float_array);
    p = parse_embedding_request(json{{"input", {"a", "b", "c"}}, {"encoding_format", "base64"}, {"dimensions", 64}});
    ASSERT_EQ(p.inputs.size(), 3u);
    EXPECT_EQ(std::get<std::string>(p.inputs[2]), "c");
    EXPECT_EQ(p.encoding, EmbeddingEncoding::base64);
    EXPECT_EQ(p.dimensions, 64);
    p = parse_embedding_request(json{{"input", {1, 2, 3}}});
    ASSERT_EQ(p.inputs.size(), 1u);
    EXPECT_EQ(std::get<std::vector<int32_t>>(p.inputs[0]), (std::vector<int32_t>{1, 2, 3}));
    p = parse_embedding_request(json{{"input", {{1, 2}, {3}}}, {"encoding_format", nullptr}});
    ASSERT_EQ(p.inputs.size(), 2u);
    EXPECT_EQ(std::get<std::vector<int32_t>>(p.inputs[1]), (std::vector<int32_t>{3}));
}

TEST(EmbeddingRequest, RefusesWhatItWouldNotActOn) {
    EXPECT_EQ(refused_param(json::array()), "");
    EXPECT_EQ(refused_param(json::object()), "input");
    EXPECT_EQ(refused_param(json{{"input", nullptr}}), "input");
    EXPECT_EQ(refused_param(json{{"input", ""}}), "input");
    EXPECT_EQ(refused_param(json{{"input", json::array()}}), "input");
    EXPECT_EQ(refused_param(json{{"input", {"a", ""}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {"a", 3}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {1, -1}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {1, 2.5}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {1, 4294967296ll}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {{1}, json::array()}}}), "input[1]");
    EXPECT_EQ(refused_param(json{{"input", {{1}, {1, "x"}}}}), "input[1][1]");
    EXPECT_EQ(refused_param(json{{"input", true}}), "input");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"model", 3}}), "model");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"encoding_format", "int8"}}), "encoding_format");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"dimensions", 0}}), "dimensions");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"dimensions", "8"}}), "dimensions");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"user", 1}}), "user");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"truncate_prompt_tokens", 8}}), "truncate_prompt_tokens");
    EXPECT_EQ(refused_param(json{{"input", "a"}, {"normalize", false}}), "normalize");
    json many = json::array();
    for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many.push_back("a");
    EXPECT_EQ(refused_param(json{{"input", many}}), "input");
}

TEST(EmbeddingResponse, Base64IsLittleEndianFloat32) {
    EXPECT_EQ(base64_floats({}), "");
    EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");           // 00 00 80 3f
    EXPECT_EQ(base64_floats({1.0f, -2.0f}), "AACAPwAAAMA="); // ... 00 00 00 c0
    EXPECT_EQ(base64_floats({0.5f, 0.25f, 3.0f}), "AAAAPwAAgD4AAEBA");
}

TEST(EmbeddingResponse, CollectsInOrderAndReportsErrors) {
    EmbeddingAssembler a("m", EmbeddingEncoding::float_array, 2);
    engine::Delta d;
    d.request_done = true;
    d.finish_reason = engine::FinishReason::stop;
    d.usage.prompt_tokens = 4;
    d.embedding = {0.6f, 0.8f};
    a.add(1, d);
    EXPECT_FALSE(a.done());
    d.usage.prompt_tokens = 3;
    d.embedding = {1.0f, 0.0f};
    a.add(0, d);
    ASSERT_TRUE(a.done());
    EXPECT_FALSE(a.error());
    const json r = a.response();
    EXPECT_EQ(r["data"][0]["embedding"], json({1.0, 0.0}));
    EXPECT_EQ(r["data"][1]["index"], 1);
    EXPECT_EQ(r["usage"]["prompt_tokens"], 7);
    EXPECT_EQ(r["model"], "m");
    EmbeddingAssembler failed("m", EmbeddingEncoding::base64, 1);
    d.finish_reason = engine::FinishReason::error;
    d.error = "model step failed";
    d.embedding.clear();
    failed.add(0, d);
    ASSERT_TRUE(failed.done());
    EXPECT_EQ(failed.error(), "model step failed");
}

}  // namespace
}  // namespace pagoda::server
