// `pagoda serve` on a bert encoder (an embedding model): /v1/embeddings takes token-id arrays (and
// text through the model's tokenizer), each vector L2-normalised and the same alone or beside
// others; generation endpoints answer 400 naming the model as an embedding model. A jina-bert-v2
// model's embedding is the reference backend's mean-pooled hidden rows.
#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "server/serve_harness.h"

using namespace pagoda::test;
using json = nlohmann::json;

namespace {

std::vector<float> vector_of(const json& item) { return item.at("embedding").get<std::vector<float>>(); }

TEST(ServeEncoder, EmbedsTokenIdsAndRefusesGeneration) {
    if (!std::filesystem::exists(fixture("vocab/ggml-vocab-gpt-2.gguf"))) GTEST_SKIP() << "the GPT-2 vocabulary fixture is absent";
    ServeProcess s({}, server_bert_test_model());
    const HttpResult both = http_request(s.port(), "POST", "/v1/embeddings",
                                         R"({"model":"serve-bert","input":[[1,2,3,4,5],[900,17,17,3000]]})");
    ASSERT_EQ(both.status, 200) << both.body;
    const json body = json::parse(both.body);
    ASSERT_EQ(body.at("data").size(), 2u);
    const std::vector<float> first = vector_of(body["data"][0]), second = vector_of(body["data"][1]);
    ASSERT_EQ(first.size(), 64u);  // the tiny preset's width
    double norm = 0;
    for (float x : first) norm += double(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-5);
    EXPECT_NE(first, second);
    EXPECT_EQ(body["usage"]["prompt_tokens"], 9);

    // The first input alone gives the same vector, bit for bit (batch invariance, no cached KV).
    const HttpResult alone = http_request(s.port(), "POST", "/v1/embeddings", R"({"model":"serve-bert","input":[[1,2,3,4,5]]})");
    ASSERT_EQ(alone.status, 200) << alone.body;
    EXPECT_EQ(vector_of(json::parse(alone.body)["data"][0]), first);

    const HttpResult text = http_request(s.port(), "POST", "/v1/embeddings", R"({"model":"serve-bert","input":"hello world"})");
    EXPECT_EQ(text.status, 200) << text.body;

    for (const auto& [path, request] : {std::pair{"/v1/completions", R"({"model":"serve-bert","prompt":"hi","max_tokens":4})"},
                                        std::pair{"/v1/chat/completions",
                                                  R"({"model":"serve-bert","messages":[{"role":"user","content":"hi"}]})"}}) {
        const HttpResult refused = http_request(s.port(), "POST", path, request);
        EXPECT_EQ(refused.status, 400) << path << ": " << refused.body;
        EXPECT_NE(refused.body.find("is an embedding model"), std::string::npos) << path << ": " << refused.body;
    }
}

// Text through the model's own WordPiece tokenizer: [CLS] ... [SEP] around lowercased pieces, and
// the embedding of the text is the embedding of those ids.
TEST(ServeEncoder, EmbedsTextThroughItsWordPieceTokenizer) {
    ServeProcess s({}, server_bert_wordpiece_test_model());
    const HttpResult tok = http_request(s.port(), "POST", "/tokenize", R"({"content":"Hello, World!","add_special":true})");
    ASSERT_EQ(tok.status, 200) << tok.body;
    const std::vector<int32_t> ids = json::parse(tok.body).at("tokens").get<std::vector<int32_t>>();
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids.front(), 2);  // [CLS]
    EXPECT_EQ(ids.back(), 3);   // [SEP]
    for (int32_t id : ids) EXPECT_NE(id, 1) << "an unknown piece";  // [UNK]
    const HttpResult back = http_request(s.port(), "POST", "/detokenize",
                                         json{{"tokens", std::vector<int32_t>(ids.begin() + 1, ids.end() - 1)}}.dump());
    ASSERT_EQ(back.status, 200) << back.body;
    // The BERT normalizer lowercases; WordPiece's decoder joins words with spaces (no cleanup).
    EXPECT_EQ(json::parse(back.body).at("content"), "hello , world !");

    const HttpResult text = http_request(s.port(), "POST", "/v1/embeddings", R"({"input":"Hello, World!"})");
    const HttpResult by_ids = http_request(s.port(), "POST", "/v1/embeddings", json{{"input", {ids}}}.dump());
    ASSERT_EQ(text.status, 200) << text.body;
    ASSERT_EQ(by_ids.status, 200) << by_ids.body;
    EXPECT_EQ(json::parse(text.body)["usage"]["prompt_tokens"], ids.size());
    EXPECT_EQ(vector_of(json::parse(text.body)["data"][0]), vector_of(json::parse(by_ids.body)["data"][0]));
}

// jina-bert-v2 (ALiBi attention, GEGLU) served: the embedding of a text is the mean of the reference
// backend's hidden rows for the text's tokens (its pooling_type mean), L2-normalised; and the same,
// bit for bit, beside another input.
TEST(ServeEncoder, JinaBertV2EmbeddingIsTheReferencesMeanPool) {
    const std::string path = server_jina_test_model();
    ServeProcess s({}, path);
    const HttpResult tok = http_request(s.port(), "POST", "/tokenize", R"({"content":"the quick brown fox","add_special":true})");
    ASSERT_EQ(tok.status, 200) << tok.body;
    const std::vector<int32_t> ids = json::parse(tok.body).at("tokens").get<std::vector<int32_t>>();
    ASSERT_GE(ids.size(), 4u);
    const HttpResult one = http_request(s.port(), "POST", "/v1/embeddings", R"({"input":"the quick brown fox"})");
    const HttpResult two = http_request(s.port(), "POST", "/v1/embeddings", R"({"input":["the quick brown fox","a b"]})");
    ASSERT_EQ(one.status, 200) << one.body;
    ASSERT_EQ(two.status, 200) << two.body;
    const std::vector<float> got = vector_of(json::parse(one.body)["data"][0]);
    EXPECT_EQ(vector_of(json::parse(two.body)["data"][0]), got);

    auto file = std::shared_ptr<const pagoda::gguf::File>(pagoda::gguf::File::open(path));
    auto reference = pagoda::model::open_step_model(
        file, {.backend = "reference", .threads = 1, .kv = {.block_size = 16}, .tokens_wanted = 256});
    pagoda::model::Batch b;
    std::vector<int32_t> blocks;
    for (int32_t i = 0; i < int32_t((ids.size() + 15) / 16); ++i) blocks.push_back(i);
    const int32_t seq = b.add_sequence(blocks);
    for (size_t p = 0; p < ids.size(); ++p) b.add(ids[p], int32_t(p), seq, int64_t(p), false, true);
    reference->forward(b);
    const std::vector<float>& rows = reference->hidden_rows();
    const size_t dim = rows.size() / ids.size();
    ASSERT_EQ(got.size(), dim);
    std::vector<double> mean(dim, 0.0);
    for (size_t t = 0; t < ids.size(); ++t)
        for (size_t i = 0; i < dim; ++i) mean[i] += rows[t * dim + i] / double(ids.size());
    double norm = 0;
    for (double x : mean) norm += x * x;
    for (size_t i = 0; i < dim; ++i) EXPECT_NEAR(got[i], mean[i] / std::sqrt(norm), 1e-4) << i;
}

}  // namespace
