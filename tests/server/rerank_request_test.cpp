// /v1/rerank and /v1/score bodies: every accepted shape, a 400 naming the field for the rest;
// the prompt form's one-pass substitution; the answer tokens; the response shapes with the score
// sigmoid(yes - no), best first with equal scores in input order; docs/api.md's rerank field table.
#include <cmath>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "chat/chat_template.h"
#include "fixtures.h"
#include "server/api_error.h"
#include "server/rerank_prompt.h"
#include "server/rerank_request.h"
#include "server/rerank_response.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

ApiError rerank_error(const json& body, bool score = false) {
    try {
        score ? parse_score_request(body) : parse_rerank_request(body);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        return e;
    }
    ADD_FAILURE() << "accepted: " << body.dump();
    return ApiError::invalid("accepted");
}

TEST(RerankRequest, AcceptsStringsAndTextObjects) {
    const auto p = parse_rerank_request(json::parse(
        R"({"model":"m","query":"q","documents":["a",{"text":"b"}],"top_n":1,"return_documents":false,"user":"u"})"));
    EXPECT_EQ(p.model, "m");
    ASSERT_EQ(p.pairs.size(), 2u);
    EXPECT_EQ(p.pairs[0].query, "q");
    EXPECT_EQ(p.pairs[0].document, "a");
    EXPECT_EQ(p.pairs[1].document, "b");
    EXPECT_EQ(p.top_n, 1);
    EXPECT_FALSE(p.return_documents);
    EXPECT_FALSE(p.score);
    const auto d = parse_rerank_request(json::parse(R"({"query":"q","documents":["a"],"top_n":null})"));
    EXPECT_FALSE(d.top_n.has_value());
    EXPECT_TRUE(d.return_documents);  // Jina's and vLLM's default
}

TEST(RerankRequest, RefusalsNameTheField) {
    EXPECT_EQ(rerank_error(json::parse(R"({"documents":["a"]})")).param, "query");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q"})")).param, "documents");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"","documents":["a"]})")).param, "query");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":1,"documents":["a"]})")).param, "query");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":[]})")).param, "documents");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":"a"})")).param, "documents");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a",3]})")).param, "documents[1]");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a",""]})")).param, "documents[1]");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":[{"txt":"a"}]})")).param, "documents[0].txt");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":[{}]})")).param, "documents[0].text");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"top_n":0})")).param, "top_n");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"top_n":1.5})")).param, "top_n");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"return_documents":1})")).param,
              "return_documents");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"model":3})")).param, "model");
    // Fields not acted on, by name: a known refusal and an unknown field alike.
    const ApiError chunks = rerank_error(json::parse(R"({"query":"q","documents":["a"],"max_chunks_per_doc":2})"));
    EXPECT_EQ(chunks.param, "max_chunks_per_doc");
    EXPECT_EQ(chunks.code, "unsupported_parameter");
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"frobnicate":1})")).param, "frobnicate");
    // A score field on rerank is unknown there.
    EXPECT_EQ(rerank_error(json::parse(R"({"query":"q","documents":["a"],"text_1":"x"})")).param, "text_1");
    json many = {{"query", "q"}, {"documents", json::array()}};
    for (size_t i = 0; i <= kMaxRerankDocuments; ++i) many["documents"].push_back("d");
    EXPECT_EQ(rerank_error(many).param, "documents");
    EXPECT_EQ(rerank_error(json::array()).param, "");
}

TEST(ScoreRequest, PairsOneToManyAndListToList) {
    auto p = parse_score_request(json::parse(R"({"text_1":"q","text_2":["a","b"]})"));
    ASSERT_EQ(p.pairs.size(), 2u);
    EXPECT_TRUE(p.score);
    EXPECT_EQ(p.pairs[1].query, "q");
    EXPECT_EQ(p.pairs[1].document, "b");
    p = parse_score_request(json::parse(R"({"text_1":["x","y"],"text_2":["a","b"],"model":"m"})"));
    ASSERT_EQ(p.pairs.size(), 2u);
    EXPECT_EQ(p.pairs[1].query, "y");
    EXPECT_EQ(p.pairs[1].document, "b");
    p = parse_score_request(json::parse(R"({"text_1":["x"],"text_2":["a","b","c"]})"));
    ASSERT_EQ(p.pairs.size(), 3u);
    EXPECT_EQ(p.pairs[2].query, "x");
    p = parse_score_request(json::parse(R"({"text_1":"x","text_2":"a"})"));
    ASSERT_EQ(p.pairs.size(), 1u);
}

TEST(ScoreRequest, RefusalsNameTheField) {
    EXPECT_EQ(rerank_error(json::parse(R"({"text_2":"a"})"), true).param, "text_1");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":"a"})"), true).param, "text_2");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":["x","y"],"text_2":["a","b","c"]})"), true).param, "text_1");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":"x","text_2":[]})"), true).param, "text_2");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":"x","text_2":["a",null]})"), true).param, "text_2[1]");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":"x","text_2":"a","truncate_prompt_tokens":4})"), true).param,
              "truncate_prompt_tokens");
    EXPECT_EQ(rerank_error(json::parse(R"({"text_1":"x","text_2":"a","query":"q"})"), true).param, "query");
}

TEST(RerankPrompt, SubstitutesInOnePass) {
    const auto p = RerankPrompt::from_form("<q>{query}</q>{x}<d>{document}</d>{query", "test");
    // A query that contains a placeholder is not expanded again; other braces stay.
    EXPECT_EQ(p.render("a {document} b", "D"), "<q>a {document} b</q>{x}<d>D</d>{query");
    EXPECT_EQ(p.render("", ""), "<q></q>{x}<d></d>{query");
    EXPECT_THROW(RerankPrompt::from_form("only {query}", "test"), Error);
    EXPECT_THROW(RerankPrompt::from_form("only {document}", "test"), Error);
}

TEST(RerankPrompt, ChatTemplateFormCarriesQwen3RerankersInstruction) {
    const auto tmpl = chat::ChatTemplate::builtin("chatml");
    const auto p = RerankPrompt::from_chat_template(tmpl, "", "");
    EXPECT_EQ(p.render("Q", "D"),
              "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
              "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
              "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: Q\n"
              "<Document>: D<|im_end|>\n<|im_start|>assistant\n");
}

tokenizer::VocabSpec vocab_spec(std::vector<std::string> extra) {
    tokenizer::VocabSpec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "a"};
    for (auto& t : extra) s.tokens.push_back(std::move(t));
    return s;
}

TEST(RerankPrompt, AnswerTokensByTextOrId) {
    const auto v = tokenizer::Vocab::from_spec(vocab_spec({"yes", "no", "12"}));
    EXPECT_EQ(rerank_answer_tokens(v, ""), std::make_pair(4, 5));
    EXPECT_EQ(rerank_answer_tokens(v, "no,yes"), std::make_pair(5, 4));
    EXPECT_EQ(rerank_answer_tokens(v, "12,3"), std::make_pair(6, 3));  // text first, then an id
    EXPECT_THROW(rerank_answer_tokens(v, "yes"), Error);
    EXPECT_THROW(rerank_answer_tokens(v, "yes,no,a"), Error);
    EXPECT_THROW(rerank_answer_tokens(v, "yes,yes"), Error);
    EXPECT_THROW(rerank_answer_tokens(v, "yes,maybe"), Error);
    EXPECT_THROW(rerank_answer_tokens(v, "yes,7"), Error);  // past the vocabulary
    EXPECT_THROW(rerank_answer_tokens(v, ",no"), Error);
    const auto without = tokenizer::Vocab::from_spec(vocab_spec({"yes"}));
    EXPECT_FALSE(rerank_answer_tokens(without, "").has_value());
}

engine::Delta scored(float yes, float no, int64_t prompt_tokens) {
    engine::Delta d;
    d.token_logits = {yes, no};
    d.finish_reason = engine::FinishReason::stop;
    d.request_done = true;
    d.usage.prompt_tokens = prompt_tokens;
    return d;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(RerankResponse, BestFirstWithEqualScoresInInputOrder) {
    RerankParams p = parse_rerank_request(json::parse(R"({"query":"q","documents":["a","b","c","d"],"top_n":3})"));
    RerankAssembler a("m", "rerank-1", 0, p);
    a.add(2, scored(1.0f, 0.0f, 5));
    a.add(0, scored(0.0f, 2.0f, 4));
    EXPECT_FALSE(a.done());
    a.add(3, scored(2.0f, 1.0f, 6));  // the same difference as c's: tied, input order
    a.add(1, scored(3.0f, 0.5f, 7));
    ASSERT_TRUE(a.done());
    EXPECT_FALSE(a.error());
    const json want = {
        {"id", "rerank-1"},
        {"model", "m"},
        {"results",
         {{{"index", 1}, {"relevance_score", sigmoid(2.5)}, {"document", {{"text", "b"}}}},
          {{"index", 2}, {"relevance_score", sigmoid(1.0)}, {"document", {{"text", "c"}}}},
          {{"index", 3}, {"relevance_score", sigmoid(1.0)}, {"document", {{"text", "d"}}}}}},
        {"usage", {{"prompt_tokens", 22}, {"total_tokens", 22}}}};
    EXPECT_EQ(a.response(), want);
    EXPECT_EQ(rerank_order({0.5, 0.7, 0.5, 0.7, 0.1}), (std::vector<size_t>{1, 3, 0, 2, 4}));
}

TEST(RerankResponse, ScoreShapeInInputOrderAndErrors) {
    RerankParams p = parse_score_request(json::parse(R"({"text_1":"q","text_2":["a","b"]})"));
    RerankAssembler a("m", "score-1", 42, p);
    a.add(0, scored(-1.0f, 1.0f, 3));
    a.add(1, scored(4.0f, 1.0f, 3));
    json got = a.response();
    ASSERT_EQ(got["data"].size(), 2u);
    EXPECT_NEAR(got["data"][0]["score"].get<double>(), sigmoid(-2.0), 1e-16);
    EXPECT_NEAR(got["data"][1]["score"].get<double>(), sigmoid(3.0), 1e-16);
    got["data"][0].erase("score");
    got["data"][1].erase("score");
    const json want = {{"id", "score-1"}, {"object", "list"}, {"created", 42}, {"model", "m"},
                       {"data", {{{"index", 0}, {"object", "score"}}, {{"index", 1}, {"object", "score"}}}},
                       {"usage", {{"prompt_tokens", 6}, {"total_tokens", 6}}}};
    EXPECT_EQ(got, want);

    RerankAssembler b("m", "x", 0, p);
    engine::Delta failed;
    failed.finish_reason = engine::FinishReason::error;
    failed.error = "boom";
    failed.request_done = true;
    b.add(0, failed);
    engine::Delta empty = scored(0, 0, 1);
    empty.token_logits.clear();
    b.add(1, empty);
    EXPECT_TRUE(b.done());
    EXPECT_EQ(b.error(), std::optional<std::string>("boom"));
    EXPECT_THROW(b.add(2, scored(0, 0, 1)), Error);
}

// docs/api.md's rerank table (rows "| `name` | yes/— | yes/— | use | why |", between the
// rerank-fields markers) is rerank_request_fields().
TEST(RerankRequest, DocsTableIsTheCodesList) {
    std::ifstream in(pagoda::test::source_dir() + "/docs/api.md");
    ASSERT_TRUE(in) << "docs/api.md not found";
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string doc = ss.str();
    const size_t begin = doc.find("<!-- rerank-fields:begin -->"), end = doc.find("<!-- rerank-fields:end -->");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    std::istringstream lines(doc.substr(begin, end - begin));
    const std::regex row(R"(^\| `([a-z_0-9]+)` \| (yes|—) \| (yes|—) \| (honoured|no-op|refused) \|.*)");
    std::vector<std::string> documented;
    std::string line;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        documented.push_back(m[1]);
        const RequestField* f = nullptr;
        for (const auto& x : rerank_request_fields())
            if (x.name == m[1].str()) f = &x;
        ASSERT_NE(f, nullptr) << "docs/api.md lists '" << m[1] << "', which the code does not know";
        EXPECT_EQ(f->completions, m[2] == "yes") << m[1];
        EXPECT_EQ(f->chat, m[3] == "yes") << m[1];
        EXPECT_EQ(field_use_name(f->use), m[4].str()) << m[1];
    }
    for (const auto& f : rerank_request_fields())
        EXPECT_NE(std::find(documented.begin(), documented.end(), std::string(f.name)), documented.end())
            << "docs/api.md's rerank table lacks '" << f.name << "'";
    EXPECT_EQ(documented.size(), rerank_request_fields().size()) << "a field is listed twice";
}

}  // namespace
}  // namespace pagoda::server
