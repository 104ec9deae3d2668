// Speculative decoding by prompt lookup: the n-gram proposer, the sampler's verification rule
// (statistically: the sampled distribution is unchanged), and EngineCore with speculation on giving
// greedy outputs identical to speculation off — with high acceptance (a model that copies), low
// acceptance (hashed logits), preemption, n > 1, stop tokens and a real random-weight model.
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/draft_ngram.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "engine/fake_step_model.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;
using test::FakeStepModel;
using test::greedy_request;
using test::make_prompt;

constexpr int64_t kVocab = 48;

TEST(NgramDraft, ProposesWhatFollowedTheLatestLongestMatch) {
    const std::vector<int32_t> c = {1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3};
    // Suffix [1 2 3] occurs at 0: then 4 5 9.
    EXPECT_EQ(propose_ngram_draft(c, 1, 3, 3), (std::vector<int32_t>{4, 5, 9}));
    // Only 2-grams: [2 3] last occurred at 6: then 7 8 1.
    EXPECT_EQ(propose_ngram_draft(c, 1, 2, 3), (std::vector<int32_t>{7, 8, 1}));
    EXPECT_EQ(propose_ngram_draft(c, 1, 3, 2), (std::vector<int32_t>{4, 5}));
    // Capped by the end of the context.
    EXPECT_EQ(propose_ngram_draft(std::vector<int32_t>{5, 6, 5}, 1, 2, 4), (std::vector<int32_t>{6, 5}));
    EXPECT_TRUE(propose_ngram_draft(std::vector<int32_t>{1, 2, 3}, 1, 2, 4).empty());
    EXPECT_TRUE(propose_ngram_draft(std::vector<int32_t>{7}, 1, 2, 4).empty());
    EXPECT_TRUE(propose_ngram_draft(c, 4, 5, 4).empty());  // [8 1 2 3] and [7 8 1 2 3] occur only at the end
}

// Keyed verification: a draft d at a position is accepted iff it is the token the keyed draw picks
// there, so over many positions the accepted share of d is p(d) (what rejection sampling accepts)
// and the tokens, with or without drafts, follow the sampler's distribution (chi-square over a small
// vocabulary, drafts likely, unlikely and cut by top-k). Greedy: only the argmax is accepted.
TEST(SpeculativeSampler, KeyedVerificationAcceptsWithTheDraftsProbability) {
    const std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
    SamplingParams params;
    params.temperature = 1.0f;
    params.seed = 7;
    for (int top_k : {0, 3})
        for (int32_t draft : {0, 3, 4}) {
            params.top_k = top_k;
            // Expected: softmax over the kept tokens.
            std::vector<double> expect(logits.size(), 0.0);
            std::vector<int> order = {0, 1, 2, 4, 3};  // by logit
            const size_t keep = top_k ? size_t(top_k) : logits.size();
            double z = 0;
            for (size_t i = 0; i < keep; ++i) z += std::exp(double(logits[size_t(order[i])]));
            for (size_t i = 0; i < keep; ++i) expect[size_t(order[i])] = std::exp(double(logits[size_t(order[i])])) / z;
            Sampler s(params);
            const int n = 200000;
            std::vector<int> counts(logits.size(), 0);
            int accepted = 0;
            for (int t = 0; t < n; ++t) {
                std::vector<float> row = logits;
                const int32_t tok = s.sample(row.data(), int64_t(row.size()), {}, t);
                ASSERT_GE(tok, 0);
                ++counts[size_t(tok)];
                accepted += tok == draft;
            }
            double chi2 = 0;
            for (size_t i = 0; i < logits.size(); ++i) {
                if (expect[i] == 0) {
                    EXPECT_EQ(counts[i], 0) << "token " << i << " is outside top-k but was drawn";
                    continue;
                }
                const double e = expect[i] * n;
                chi2 += (counts[i] - e) * (counts[i] - e) / e;
            }
            // 4 degrees of freedom at most: p = 0.001 is 18.5.
            EXPECT_LT(chi2, 18.5) << "top_k " << top_k << " draft " << draft;
            EXPECT_NEAR(double(accepted) / n, expect[size_t(draft)], 0.005);
        }
    // Greedy: the argmax whatever the position.
    params.temperature = 0;
    Sampler g(params);
    for (int64_t pos : {0, 5, 99}) {
        std::vector<float> row = logits;
        EXPECT_EQ(g.sample(row.data(), 5, {}, pos), 0);
    }
}

// Next token = the token `period` positions back (once there are that many), else hashed: outputs
// repeat their prompt's last `period` tokens forever, so prompt lookup drafts are right.
void copy_logits(const std::vector<int32_t>& context, float* logits, int64_t vocab) {
    constexpr size_t period = 7;
    test::hashed_logits(context, logits, vocab);
    if (context.size() >= period) logits[context[context.size() - period]] = 100.0f;
}

struct RunResult {
    std::map<RequestId, std::vector<int32_t>> tokens;
    EngineStats stats;
    int steps = 0;
};

RunResult run_all(FakeStepModel::LogitsFn fn, const SpeculativeOptions& spec, int n_requests, int32_t n_blocks,
                  int32_t max_seqs, int32_t n_choices = 1) {
    FakeStepModel model(kVocab, n_blocks, 4, 1 << 20, fn);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = max_seqs};
    options.speculative = spec;
    EngineCore core(model, nullptr, options);
    Driver driver(core);
    for (int i = 0; i < n_requests; ++i) {
        Request r = greedy_request(make_prompt(5 + i % 9, uint32_t(i), kVocab), 20 + i % 13);
        r.n = n_choices;
        if (i % 5 == 4) r.stop.stop_token_ids = {int32_t(i % kVocab)};
        driver.add(std::move(r));
    }
    RunResult out;
    out.steps = driver.run();
    for (const auto& [id, res] : driver.results) {
        EXPECT_TRUE(res.done) << id;
        for (const auto& [index, c] : res.choices) {
            auto& t = out.tokens[id * 100 + RequestId(index)];
            t = c.tokens;
        }
    }
    out.stats = core.stats();
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    return out;
}

TEST(SpeculativeEngine, GreedyOutputsAreIdenticalWithAndWithoutSpeculation) {
    const SpeculativeOptions off{};
    SpeculativeOptions on{.ngram_max = 3, .ngram_min = 1, .max_draft = 6};
    on.draft_length_by_cost = false;  // the fakes' steps take microseconds: timings would be noise
    for (auto [fn, name] : {std::pair{FakeStepModel::LogitsFn(copy_logits), "copying"},
                            std::pair{FakeStepModel::LogitsFn(test::hashed_logits), "hashed"}})
        for (int32_t batch : {1, 4, 32}) {
            SCOPED_TRACE(std::string(name) + " batch " + std::to_string(batch));
            const RunResult plain = run_all(fn, off, 24, 1024, batch);
            const RunResult spec = run_all(fn, on, 24, 1024, batch);
            EXPECT_EQ(spec.tokens, plain.tokens);
            EXPECT_EQ(plain.stats.draft_tokens, 0);
            EXPECT_GT(spec.stats.draft_tokens, 0);
            if (std::string(name) == "copying") {
                EXPECT_GT(spec.stats.accepted_draft_tokens, spec.stats.draft_tokens / 2);
                EXPECT_LT(spec.steps, plain.steps);
            }
        }
}

TEST(SpeculativeEngine, IdenticalUnderPreemptionAndWithChoices) {
    const SpeculativeOptions off{};
    SpeculativeOptions on{.ngram_max = 2, .ngram_min = 1, .max_draft = 5};
    on.draft_length_by_cost = false;  // lengths by rule: the fakes' timings would be noise
    // 14 blocks of 4: far too few for 10 requests of up to 45 tokens: preemption with drafts in flight.
    const RunResult plain = run_all(copy_logits, off, 10, 14, 4, 2);
    const RunResult spec = run_all(copy_logits, on, 10, 14, 4, 2);
    EXPECT_GT(spec.stats.preemptions, 0);
    EXPECT_GT(spec.stats.accepted_draft_tokens, 0);
    EXPECT_EQ(spec.tokens, plain.tokens);
}

TEST(SpeculativeEngine, RejectsBadOptions) {
    FakeStepModel model(kVocab, 16, 4);
    EngineOptions options;
    options.speculative = {.ngram_max = 2, .ngram_min = 3};
    EXPECT_THROW(EngineCore(model, nullptr, options), Error);
    options.speculative = {.ngram_max = 2, .ngram_min = 1, .max_draft = 0};
    EXPECT_THROW(EngineCore(model, nullptr, options), Error);
    options.speculative = {.ngram_max = 65};
    EXPECT_THROW(EngineCore(model, nullptr, options), Error);
}

// The real forward pass: drafts verified beside other sequences must not change a greedy token
// (the kernels are batch invariant, so a row's logits do not depend on the draft rows beside it).
TEST(SpeculativeEngine, RandomModelGreedyIdentical) {
    model::RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 96; spec.vocab_size = 300;
    const std::string path = pagoda::test::temp_path("speculative.gguf");
    model::write_random_model(spec, nullptr, path);
    auto run = [&](SpeculativeOptions so, int32_t max_seqs) {
        auto m = model::open_step_model(path, {.threads = 2, .kv = {.block_size = 4}, .tokens_wanted = 4096});
        EngineOptions options;
        options.scheduler = {.max_batched_tokens = 256, .max_seqs = max_seqs};
        options.speculative = so;
        EngineCore core(*m, nullptr, options);
        Driver driver(core);
        for (int i = 0; i < 32; ++i) {
            // Prompts that repeat a phrase, so lookups find something to propose.
            std::vector<int32_t> p = make_prompt(6, uint32_t(i), 300);
            const auto phrase = p;
            for (int k = 0; k < 3; ++k) p.insert(p.end(), phrase.begin(), phrase.end());
            driver.add(greedy_request(p, 24));
        }
        driver.run();
        std::map<RequestId, std::vector<int32_t>> out;
        for (const auto& [id, r] : driver.results) out[id] = r.choices.at(0).tokens;
        return std::pair{out, core.stats()};
    };
    const auto [plain, plain_stats] = run({}, 32);
    // Lengths by the acceptance rule, so every batch size drafts whatever this host's timings.
    SpeculativeOptions lookup{.ngram_max = 3, .ngram_min = 1, .max_draft = 4};
    lookup.draft_length_by_cost = false;
    for (int32_t batch : {1, 8, 32}) {
        const auto [spec_tokens, spec_stats] = run(lookup, batch);
        EXPECT_EQ(spec_tokens, plain) << "batch " << batch;
        EXPECT_GT(spec_stats.draft_tokens, 0);
    }
}

}  // namespace
}  // namespace pagoda::engine
