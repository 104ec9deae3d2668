// /v1/rerank and /v1/score on a classification-head reranker (GGUF pooling_type rank, made by
// gen-model's rank head) through the gateway on the CPU backend: each score must equal the head
// computed here in double, from the file's own F32 tensors, on the last token's final hidden state
// that the reference backend (the oracle) pools for the same pair; results best first, equal
// documents tied in input order; /v1/score gives the same numbers; --rerank-tokens is refused for
// such a model at load. An encoder (bert, a cross-encoder) is scored on its CLS row instead of the
// last token's, and so is a jina-bert-v2 reranker (jina-reranker-v1's head: cls.weight to one
// score, tanh, as llama.cpp applies it, no cls.output).
#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/classifier_head.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "server/gateway.h"
#include "server/rerank_prompt.h"
#include "tokenizer/tokenizer.h"

using namespace pagoda;
using namespace pagoda::server;
using json = nlohmann::json;

namespace {

struct RankModel {
    std::string arch, path;
    std::shared_ptr<const gguf::File> file;
    std::shared_ptr<const tokenizer::Tokenizer> tok;
};

RankModel make_model(const std::string& arch, const std::string& head) {
    model::RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 2; s.dim = 32; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 48; s.vocab_size = 400;
    s.rank_head = head;
    s.seed = 7;
    RankModel m{arch, test::temp_path("rank-" + arch + "-" + head + ".gguf"), nullptr, nullptr};
    // bert's own WordPiece vocabulary has no tokenizer here yet: it borrows the GPT-2 fixture's.
    std::unique_ptr<gguf::File> vocab;
    if (arch == "bert" || arch == "jina-bert-v2") vocab = gguf::File::open(test::fixture("vocab/ggml-vocab-gpt-2.gguf"));
    model::write_random_model(s, vocab.get(), m.path);
    m.file = std::shared_ptr<const gguf::File>(gguf::File::open(m.path));
    m.tok = tokenizer::Tokenizer::from_gguf(*m.file);
    return m;
}

model::StepModelOptions step_options(const std::string& backend) {
    return {.backend = backend, .threads = 2, .kv = {.block_size = 16}, .tokens_wanted = 1024, .max_step_tokens = 64};
}

LoadedModel load(const RankModel& m, engine::EngineOptions eo) {
    LoadedModel loaded;
    loaded.engine = std::make_unique<engine::Engine>(model::open_step_model(m.file, step_options("cpu")), m.tok, std::move(eo));
    auto head = model::ClassifierHead::from_gguf(*m.file, m.arch, loaded.engine->model_info().hidden_size);
    if (!head) fail("not a rank model");
    loaded.classifier_head = std::make_shared<const model::ClassifierHead>(std::move(*head));
    loaded.description = "rank";
    return loaded;
}

GatewayOptions options(bool encoder = false) {
    GatewayOptions o;
    o.model_name = "rank-model";
    o.scheduler.max_seqs = 2;  // fewer than the documents: some wait for a seat
    o.scheduler.max_batched_tokens = encoder ? 64 : 16;  // prompts are chunked (an encoder's never are)
    return o;
}

json run(Gateway& gw, Endpoint endpoint, const json& body) {
    std::mutex mutex;
    std::vector<std::pair<size_t, engine::Delta>> deltas;
    auto job = gw.start(endpoint, body, nullptr, gw.new_request_id(), [&](size_t sub, const engine::Delta& d) {
        std::lock_guard lock(mutex);
        deltas.emplace_back(sub, d);
    });
    for (int i = 0; i < 4000 && !job->done(); ++i) {
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

// The reference backend's unnormalised last-token (encoder: CLS) hidden state for each prompt.
std::vector<std::vector<float>> reference_states(const RankModel& m, const std::vector<std::vector<int32_t>>& prompts,
                                                 const std::vector<std::vector<int32_t>>& types = {}) {
    auto step = model::open_step_model(m.file, step_options("reference"));
    engine::EngineCore core(*step, m.tok, {});
    engine::test::Driver driver(core);
    std::vector<engine::RequestId> ids;
    for (const auto& p : prompts) {
        engine::Request r;
        r.prompt = p;
        if (!types.empty()) r.token_types = types[ids.size()];
        const bool encoder = m.arch == "bert" || m.arch == "jina-bert-v2";
        r.embedding = engine::EmbeddingSpec{encoder ? engine::Pooling::cls : engine::Pooling::last, false};
        r.stop.max_tokens = 1;
        ids.push_back(driver.add(std::move(r)));
    }
    driver.run();
    std::vector<std::vector<float>> out;
    for (auto id : ids) out.push_back(driver.results[id].choices[0].embedding);
    return out;
}

// y = W x + b for the file's F32 tensor `name` ([n_in, n_out]) and its bias.
std::vector<double> layer(const gguf::File& f, const std::string& name, const std::string& bias, const std::vector<double>& x) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    const auto* w = reinterpret_cast<const float*>(t->data);
    const int64_t n_in = t->shape[0], n_out = t->shape[1];
    std::vector<double> y(size_t(n_out), 0.0);
    for (int64_t o = 0; o < n_out; ++o) {
        for (int64_t i = 0; i < n_in; ++i) y[size_t(o)] += double(w[o * n_in + i]) * x[size_t(i)];
        y[size_t(o)] += double(reinterpret_cast<const float*>(f.find_tensor(bias)->data)[o]);
    }
    return y;
}

double head_by_hand(const RankModel& m, const std::vector<float>& h) {
    std::vector<double> x(h.begin(), h.end());
    if (m.file->find_tensor("cls.weight")) {
        x = layer(*m.file, "cls.weight", "cls.bias", x);
        for (double& v : x) v = std::tanh(v);
    }
    if (m.file->find_tensor("cls.output.weight")) x = layer(*m.file, "cls.output.weight", "cls.output.bias", x);
    if (m.arch == "qwen3") return 1.0 / (1.0 + std::exp(x[1] - x[0]));  // softmax over yes, no: P(yes)
    return x[0];
}

void check_scores_are_the_head(const std::string& arch, const std::string& head) {
    const bool encoder = arch == "bert" || arch == "jina-bert-v2";
    if (encoder && !std::filesystem::exists(test::fixture("vocab/ggml-vocab-gpt-2.gguf")))
        GTEST_SKIP() << "the GPT-2 vocabulary fixture is absent";
    const RankModel m = make_model(arch, head);
    Gateway gw(options(encoder), {}, [&](engine::EngineOptions eo) { return load(m, std::move(eo)); });
    gw.load();

    const std::string query = "where do foxes live";
    const std::vector<std::string> docs = {"foxes live in dens", "the market fell", "foxes live in dens",
                                           "a", "quiet rivers run deep under the old stone bridge"};
    std::vector<std::vector<int32_t>> prompts, types;
    int64_t tokens = 0;
    for (const auto& d : docs) {
        if (encoder) {  // a cross-encoder: the tokenizer's pair, the document typed 1
            tokenizer::PairEncoding pair = m.tok->encode_pair(query, d);
            prompts.push_back(pair.ids);
            types.push_back(pair.type_ids);
            ASSERT_EQ(types.back().front(), 0);
            ASSERT_EQ(types.back().back(), 1);
        } else {
            prompts.push_back(rerank_pair_tokens(*m.tok, query, d, false));
        }
        tokens += int64_t(prompts.back().size());
    }
    // llama-server's pair: BOS query [EOS] document [EOS], the texts encoded as plain text.
    const auto q_ids = m.tok->encode(query, {.add_bos = false, .add_eos = false});
    if (!encoder) {  // the borrowed GPT-2 vocabulary adds no BOS
        ASSERT_TRUE(m.tok->vocab().add_bos());
        EXPECT_EQ(prompts[0][0], m.tok->bos());
        EXPECT_TRUE(std::equal(q_ids.begin(), q_ids.end(), prompts[0].begin() + 1));
    }

    const auto states = reference_states(m, prompts, types);
    if (encoder) {  // the document's type changes the CLS state: the types reach the model
        std::vector<std::vector<int32_t>> zeros;
        for (const auto& t : types) zeros.emplace_back(t.size(), 0);
        EXPECT_NE(reference_states(m, prompts, zeros)[0], states[0]);
    }
    std::vector<double> want;
    for (const auto& h : states) {
        ASSERT_EQ(h.size(), 32u);
        want.push_back(head_by_hand(m, h));
    }
    ASSERT_NE(want[0], want[1]);

    const json r = run(gw, Endpoint::rerank, {{"query", query}, {"documents", docs}});
    ASSERT_EQ(r["results"].size(), docs.size()) << r.dump();
    double previous = INFINITY;
    std::vector<size_t> seen;
    for (const json& x : r["results"]) {
        const size_t i = x["index"].get<size_t>();
        const double got = x["relevance_score"].get<double>();
        EXPECT_NEAR(got, want[i], 1e-4 * (1 + std::abs(want[i]))) << arch << " document " << i;
        EXPECT_LE(got, previous);
        previous = got;
        seen.push_back(i);
    }
    // Documents 0 and 2 are the same text: the same score, in input order.
    const auto p0 = std::find(seen.begin(), seen.end(), size_t(0)), p2 = std::find(seen.begin(), seen.end(), size_t(2));
    EXPECT_LT(p0, p2);
    EXPECT_EQ(r["results"][size_t(p0 - seen.begin())]["relevance_score"], r["results"][size_t(p2 - seen.begin())]["relevance_score"]);
    EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);

    const json s = run(gw, Endpoint::score, {{"text_1", query}, {"text_2", docs}});
    ASSERT_EQ(s["data"].size(), docs.size());
    for (const json& x : r["results"]) {
        const size_t i = x["index"].get<size_t>();
        EXPECT_EQ(s["data"][i]["score"], x["relevance_score"]) << i;
    }
}

TEST(GatewayRankRerank, DenseHeadScoresAreTheHeadOnTheReferenceHiddenState) { check_scores_are_the_head("llama", "dense"); }

TEST(GatewayRankRerank, Qwen3ClassifierScoresAreTheSoftmaxedYes) { check_scores_are_the_head("qwen3", "output"); }

TEST(GatewayRankRerank, CrossEncoderScoresAreTheHeadOnTheClsState) { check_scores_are_the_head("bert", "dense"); }

TEST(GatewayRankRerank, JinaRerankerScoresAreTheHeadOnTheClsState) {
    check_scores_are_the_head("jina-bert-v2", "dense");
}

TEST(GatewayRankRerank, DecoderAnswerTokensAreRefusedForAClassificationHead) {
    const RankModel m = make_model("llama", "output");
    GatewayOptions o = options();
    o.rerank_tokens = "a,b";
    Gateway gw(o, {}, [&](engine::EngineOptions eo) { return load(m, std::move(eo)); });
    try {
        gw.load();
        ADD_FAILURE() << "the load accepted --rerank-tokens on a classification-head reranker";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--rerank-tokens"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("classification head"), std::string::npos) << e.what();
    }
}

}  // namespace
