// The gateway's /v1/rerank and /v1/score over a FakeStepModel whose logits are a pure function of
// the context (hashed_logits): each score must equal sigmoid(logit(yes) - logit(no)) computed
// directly from the tokens of the prompt the form renders; which models can rerank, and the
// refusals that name why.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "core/error.h"
#include "engine/fake_step_model.h"
#include "server/gateway.h"
#include "server/rerank_prompt.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

std::shared_ptr<const tokenizer::Tokenizer> load_tokenizer() {
    const std::string path = test::vocab_path("stories260K");
    if (!std::filesystem::exists(path)) return nullptr;
    return tokenizer::Tokenizer::from_gguf(*gguf::File::open(path));
}

LoadedModel fake_model(std::shared_ptr<const tokenizer::Tokenizer> tok, engine::EngineOptions options) {
    auto step = std::make_unique<engine::test::FakeStepModel>(tok->n_vocab(), 64, 16, 1024);
    LoadedModel m;
    m.engine = std::make_unique<engine::Engine>(std::move(step), std::move(tok), std::move(options));
    m.description = "fake";
    return m;
}

GatewayOptions options() {
    GatewayOptions o;
    o.model_name = "fake-model";
    o.scheduler.max_seqs = 3;  // fewer than the documents: some wait for a seat
    o.scheduler.max_batched_tokens = 16;  // prompts are chunked
    return o;
}

// Runs a relevance request to its end: every sub-request's last delta, replayed into the Job.
json run(Gateway& gw, Endpoint endpoint, const json& body) {
    std::mutex mutex;
    std::vector<std::pair<size_t, engine::Delta>> deltas;
    auto job = gw.start(endpoint, body, nullptr, gw.new_request_id(), [&](size_t sub, const engine::Delta& d) {
        std::lock_guard lock(mutex);
        deltas.emplace_back(sub, d);
    });
    for (int i = 0; i < 2000 && !job->done(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::lock_guard lock(mutex);
        for (auto& [sub, d] : deltas) job->add(sub, d);
        deltas.clear();
    }
    EXPECT_TRUE(job->done());
    EXPECT_FALSE(job->failure().has_value());
    json r = job->response();
    job->finish(200);
    return r;
}

std::string write_form(const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / ("pagoda-rerank-form-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path) << text;
    return path.string();
}

// Two tokens named by their vocabulary text, standing for "yes" and "no".
std::pair<int32_t, int32_t> answer_tokens(const tokenizer::Tokenizer& tok, std::string& spec) {
    std::vector<int32_t> picked;
    for (int32_t id = 100; id < tok.n_vocab() && picked.size() < 2; id += 37) {
        const std::string& t = tok.vocab().text(id);
        if (!t.empty() && t.find(',') == std::string::npos && tok.vocab().find(t) == id) picked.push_back(id);
    }
    spec = tok.vocab().text(picked[0]) + "," + tok.vocab().text(picked[1]);
    return {picked[0], picked[1]};
}

double expected_score(const tokenizer::Tokenizer& tok, const std::string& form, const std::string& query,
                      const std::string& document, std::pair<int32_t, int32_t> answer) {
    const auto prompt = RerankPrompt::from_form(form, "test").tokenize(tok, query, document);
    std::vector<float> row(size_t(tok.n_vocab()));
    engine::test::hashed_logits(prompt, row.data(), tok.n_vocab());
    const double d = double(row[size_t(answer.first)]) - double(row[size_t(answer.second)]);
    return 1.0 / (1.0 + std::exp(-d));
}

TEST(GatewayRerank, ScoresAreTheYesNoLogitsOfTheRenderedPrompt) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    const std::string form = "<s>Query: {query}\nDocument: {document}\nRelevant:";
    GatewayOptions o = options();
    o.rerank_template = write_form(form);
    const auto answer = answer_tokens(*tok, o.rerank_tokens);
    Gateway gw(o, {}, [&](engine::EngineOptions eo) { return fake_model(tok, std::move(eo)); });
    gw.load();
    std::filesystem::remove(o.rerank_template);

    const std::string query = "Once upon a time";
    const std::vector<std::string> docs = {"there was a cat", "the dog ran", "there was a cat", "a", "Lily went home"};
    const json r = run(gw, Endpoint::rerank, {{"query", query}, {"documents", docs}, {"top_n", 4}});
    ASSERT_EQ(r["results"].size(), 4u);
    std::vector<double> want;
    int64_t tokens = 0;
    for (const auto& d : docs) {
        want.push_back(expected_score(*tok, form, query, d, answer));
        tokens += int64_t(RerankPrompt::from_form(form, "test").tokenize(*tok, query, d).size());
    }
    double previous = 2;
    std::vector<size_t> seen;
    for (const json& x : r["results"]) {
        const size_t i = x["index"].get<size_t>();
        EXPECT_NEAR(x["relevance_score"].get<double>(), want[i], 1e-12) << "document " << i;
        EXPECT_EQ(x["document"]["text"], docs[i]);
        EXPECT_LE(x["relevance_score"].get<double>(), previous);
        previous = x["relevance_score"].get<double>();
        seen.push_back(i);
    }
    // Documents 0 and 2 are the same text: equal scores, in input order.
    const auto p0 = std::find(seen.begin(), seen.end(), size_t(0)), p2 = std::find(seen.begin(), seen.end(), size_t(2));
    if (p0 != seen.end() && p2 != seen.end()) { EXPECT_LT(p0, p2); }
    EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);
    // The form begins with the BOS text, so no second BOS is added.
    const auto ids = RerankPrompt::from_form(form, "test").tokenize(*tok, query, docs[0]);
    EXPECT_EQ(ids[0], tok->bos());
    EXPECT_NE(ids[1], tok->bos());

    const json s = run(gw, Endpoint::score, {{"text_1", json::array({query, "Lily"})}, {"text_2", json::array({"a", "b"})}});
    ASSERT_EQ(s["data"].size(), 2u);
    EXPECT_NEAR(s["data"][0]["score"].get<double>(), expected_score(*tok, form, query, "a", answer), 1e-12);
    EXPECT_NEAR(s["data"][1]["score"].get<double>(), expected_score(*tok, form, "Lily", "b", answer), 1e-12);
}

ApiError start_error(Gateway& gw, Endpoint endpoint, const json& body) {
    try {
        gw.start(endpoint, body, nullptr, gw.new_request_id(), [](size_t, const engine::Delta&) {});
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "start() did not refuse";
    return ApiError::internal("not refused");
}

TEST(GatewayRerank, ModelsThatCannotRerankAreRefusedSayingWhy) {
    auto tok = load_tokenizer();
    if (!tok) GTEST_SKIP() << "fixture models/stories260K.gguf is absent";
    ASSERT_EQ(tok->vocab().find("yes"), tokenizer::kNoToken) << "the fixture vocabulary changed";
    const json body = {{"query", "q"}, {"documents", {"a"}}};
    {
        Gateway gw(options(), {}, [&](engine::EngineOptions eo) { return fake_model(tok, std::move(eo)); });
        gw.load();
        const ApiError e = start_error(gw, Endpoint::rerank, body);
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "model_not_supported");
        EXPECT_NE(std::string(e.what()).find("reranking is not supported by this model"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("--rerank-tokens"), std::string::npos) << e.what();
        EXPECT_EQ(start_error(gw, Endpoint::score, {{"text_1", "q"}, {"text_2", "a"}}).code, "model_not_supported");
        // The body is checked first: a bad field is named even on a model that cannot rerank.
        EXPECT_EQ(start_error(gw, Endpoint::rerank, {{"query", "q"}}).param, "documents");
    }
    {
        // A flag that names no token fails the load, naming the flag.
        GatewayOptions o = options();
        o.rerank_tokens = "yes,no";
        Gateway gw(o, {}, [&](engine::EngineOptions eo) { return fake_model(tok, std::move(eo)); });
        try {
            gw.load();
            ADD_FAILURE() << "the load accepted --rerank-tokens yes,no without those tokens";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("--rerank-tokens"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
