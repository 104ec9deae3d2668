// Speculative decoding with a draft model (engine/draft_model.h): a draft that computes the same
// function as the target is always right, so every drafted token must be accepted — which only
// holds if the draft's own KV bookkeeping (catch-up, truncating refused drafts, keeping accepted
// ones) is exact; the fake model also checks every slot it reads holds the position it expects.
// A wrong draft changes no greedy token; preemption, n > 1, a draft pool too small and a draft
// model that fails change none either; at temperature > 0 the sampled distribution stays the
// target's; and real random-weight models (an F16 draft of an F32 target) agree token for token.
#include <array>
#include <cmath>
#include <set>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/draft_length.h"
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

// Next token = the token 7 positions back once there are that many, else hashed: a model whose
// outputs are predictable (what a good draft model sees).
void periodic_logits(const std::vector<int32_t>& context, float* logits, int64_t vocab) {
    test::hashed_logits(context, logits, vocab);
    if (context.size() >= 7) logits[context[context.size() - 7]] = 100.0f;
}

// A draft that is mostly wrong: another hash of the context.
void other_logits(const std::vector<int32_t>& context, float* logits, int64_t vocab) {
    std::vector<int32_t> shifted = context;
    shifted.push_back(12345);
    test::hashed_logits(shifted, logits, vocab);
}

struct Outcome {
    std::map<RequestId, std::vector<int32_t>> tokens;
    EngineStats stats;
    DraftModelStats draft;
    int steps = 0;
    int64_t prompt_tokens = 0, generated = 0;
};

struct Scenario {
    FakeStepModel::LogitsFn target = periodic_logits;
    FakeStepModel::LogitsFn draft;  // empty: no speculation
    int32_t target_blocks = 1024, draft_blocks = 1024;
    int32_t max_seqs = 8, n_requests = 24, n_choices = 1, max_draft = 6;
    bool stop_tokens = true;  // every fifth request stops at a token (drafts past it go unused)
};

Outcome run(const Scenario& s) {
    FakeStepModel target(kVocab, s.target_blocks, 4, 1 << 20, s.target);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 64, .max_seqs = s.max_seqs};
    if (s.draft) {
        options.speculative.draft_model = std::make_shared<FakeStepModel>(kVocab, s.draft_blocks, 4, 1 << 20, s.draft);
        options.speculative.max_draft = s.max_draft;
        options.speculative.draft_max_step_tokens = 32;
        options.speculative.draft_length_by_cost = false;  // fakes cost nothing to time
    }
    EngineCore core(target, nullptr, options);
    Driver driver(core);
    Outcome out;
    for (int i = 0; i < s.n_requests; ++i) {
        Request r = greedy_request(make_prompt(5 + i % 9, uint32_t(i), kVocab), 20 + i % 13);
        r.n = s.n_choices;
        if (s.stop_tokens && i % 5 == 4) r.stop.stop_token_ids = {int32_t(i % kVocab)};
        out.prompt_tokens += int64_t(r.prompt.size()) * s.n_choices;
        driver.add(std::move(r));
    }
    out.steps = driver.run();
    for (const auto& [id, res] : driver.results) {
        EXPECT_TRUE(res.done) << id;
        for (const auto& [index, c] : res.choices) {
            out.tokens[id * 100 + RequestId(index)] = c.tokens;
            out.generated += int64_t(c.tokens.size());
        }
    }
    out.stats = core.stats();
    if (core.drafter()) {
        out.draft = core.drafter()->stats();
        EXPECT_EQ(core.drafter()->num_sequences(), 0) << "finished sequences give their draft KV back";
    }
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    return out;
}

// The proposer alone: after the target accepts 2 of 4 drafts and replaces the third, the next
// proposal keeps the KV of the 2 accepted drafts (feeds from there, not from the start), and its
// logits rows see exactly the target's tokens — the refused drafts are gone from the draft's KV.
TEST(DraftModelProposer, KeepsAcceptedDraftsAndDropsRefusedOnes) {
    FakeStepModel draft(kVocab, 64, 4, 1 << 20, periodic_logits);
    DraftModelProposer proposer(draft, kVocab, 32);
    std::vector<int32_t> tokens = make_prompt(10, 3, kVocab);
    const auto first = proposer.propose(std::vector<DraftWant>{{.seq = 7, .tokens = tokens, .k = 4}});
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(first[0].size(), 4u);
    // The catch-up fed all 10 prompt tokens; then 3 drafts were fed, one per forward.
    EXPECT_EQ(draft.step_sizes, (std::vector<int64_t>{10, 1, 1, 1}));
    EXPECT_EQ(draft.contexts.back().size(), 13u);

    tokens.insert(tokens.end(), first[0].begin(), first[0].begin() + 2);  // 2 accepted
    tokens.push_back((first[0][2] + 1) % int32_t(kVocab));                 // the third replaced
    draft.step_sizes.clear();
    draft.contexts.clear();
    const auto second = proposer.propose(std::vector<DraftWant>{{.seq = 7, .tokens = tokens, .k = 2}});
    ASSERT_EQ(second[0].size(), 2u);
    // The accepted drafts (positions 10, 11) kept their KV, so only position 12 (the replacement)
    // is fed, then one draft row.
    EXPECT_EQ(draft.step_sizes, (std::vector<int64_t>{1, 1}));
    ASSERT_EQ(draft.contexts.size(), 2u);
    EXPECT_EQ(draft.contexts[0], tokens) << "the draft's context is the target's tokens exactly";
    EXPECT_EQ(proposer.stats().reused_tokens, 2 + 1) << "two accepted drafts and the last prompt token";
    proposer.forget(7);
    EXPECT_EQ(proposer.num_sequences(), 0);
    EXPECT_EQ(proposer.blocks().num_used_blocks(), 0);
}

TEST(DraftModelEngine, AnExactDraftIsAlwaysAcceptedAndChangesNothing) {
    for (auto fn : {FakeStepModel::LogitsFn(periodic_logits), FakeStepModel::LogitsFn(test::hashed_logits)})
        for (int32_t batch : {1, 4, 32}) {
            SCOPED_TRACE("batch " + std::to_string(batch));
            Scenario s{.target = fn, .max_seqs = batch, .stop_tokens = false};
            const Outcome plain = run(s);
            s.draft = fn;
            const Outcome spec = run(s);
            EXPECT_EQ(spec.tokens, plain.tokens);
            EXPECT_GT(spec.stats.draft_tokens, 0);
            EXPECT_EQ(spec.stats.accepted_draft_tokens, spec.stats.draft_tokens) << "the draft computes what the target does";
            EXPECT_LT(spec.steps, plain.steps);
            EXPECT_GT(spec.draft.reused_tokens, 0) << "accepted drafts keep their draft KV";
            // Every position is fed once, plus the last real token again at each proposal.
            EXPECT_LE(spec.draft.fed_tokens, spec.prompt_tokens + spec.generated + spec.steps);
        }
}

TEST(DraftModelEngine, AWrongDraftChangesNothingAndBacksOff) {
    Scenario s{.target = periodic_logits, .max_seqs = 8};
    const Outcome plain = run(s);
    s.draft = other_logits;
    const Outcome spec = run(s);
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_GT(spec.stats.draft_tokens, 0);
    EXPECT_LT(spec.stats.accepted_draft_tokens, spec.stats.draft_tokens / 2);
    // Refusals shrink the drafts to one token and pause them: far fewer rows than 6 per token.
    EXPECT_LT(spec.stats.draft_tokens, spec.generated);
}

TEST(DraftModelEngine, PreemptionChoicesAndASmallDraftPoolChangeNothing) {
    // 14 target blocks of 4 for 10 requests of up to 45 tokens, two choices each: preemption with
    // drafts in flight; a draft pool of 12 blocks cannot hold every sequence, so some go without.
    Scenario s{.target = periodic_logits, .target_blocks = 14, .draft_blocks = 12, .max_seqs = 4, .n_requests = 10,
            .n_choices = 2, .max_draft = 5};
    const Outcome plain = run(s);
    s.draft = periodic_logits;
    const Outcome spec = run(s);
    EXPECT_GT(spec.stats.preemptions, 0);
    EXPECT_GT(spec.stats.accepted_draft_tokens, 0);
    EXPECT_GT(spec.draft.dropped, 0) << "the small draft pool turned some sequences away";
    EXPECT_EQ(spec.tokens, plain.tokens);
}

TEST(DraftModelEngine, AFailingDraftModelCostsSpeedNotOutput) {
    FakeStepModel target(kVocab, 256, 4, 1 << 20, periodic_logits);
    auto draft = std::make_shared<FakeStepModel>(kVocab, 256, 4, 1 << 20, periodic_logits);
    draft->fail_on_token = 3;  // every draft forward that sees token 3 throws
    EngineOptions options;
    options.speculative.draft_model = draft;
    options.speculative.draft_length_by_cost = false;
    EngineCore core(target, nullptr, options);
    Driver driver(core);
    std::vector<int32_t> prompt = make_prompt(9, 7, kVocab);
    prompt.push_back(3);
    driver.add(greedy_request(prompt, 30));
    driver.run();

    FakeStepModel plain_target(kVocab, 256, 4, 1 << 20, periodic_logits);
    EngineCore plain(plain_target, nullptr, {});
    Driver plain_driver(plain);
    plain_driver.add(greedy_request(prompt, 30));
    plain_driver.run();
    EXPECT_EQ(driver.results.at(1).choices.at(0).tokens, plain_driver.results.at(1).choices.at(0).tokens);
    EXPECT_EQ(core.stats().draft_tokens, 0);
    EXPECT_EQ(core.drafter()->num_sequences(), 0);
}

// The draft-length cost model: with a cheap draft and high acceptance drafts are long; as the draft
// gets dearer or acceptance falls they shorten, and where nothing pays the length is 0.
TEST(DraftCostModel, LengthFollowsCostAndAcceptance) {
    DraftCostModel m;
    EXPECT_EQ(m.best_length(0.8, 8, 1), 8) << "unmeasured costs count as zero";
    for (int i = 0; i < 50; ++i) {  // plain decode steps: 10 ms + 0.5 ms a row, one sequence
        m.observe_step(0.010 + 0.0005 * 1, 1, 1);
        m.observe_step(0.010 + 0.0005 * 5, 5, 1);
    }
    EXPECT_NEAR(m.row_cost(1), 0.0005 / 0.0105, 1e-6);
    for (int i = 0; i < 50; ++i) m.observe_draft(0.001, 1);  // a draft forward: a tenth of a step
    EXPECT_NEAR(m.draft_cost(1), 0.001 / 0.0105, 1e-6);
    const int32_t cheap_good = m.best_length(0.9, 8, 1), cheap_poor = m.best_length(0.4, 8, 1);
    EXPECT_GE(cheap_good, 5);
    EXPECT_LT(cheap_poor, cheap_good);
    EXPECT_GE(cheap_poor, 1);
    DraftCostModel dear = m;
    for (int i = 0; i < 200; ++i) dear.observe_draft(0.008, 1);  // nearly a whole step each
    EXPECT_EQ(dear.best_length(0.5, 8, 1), 0) << "a dear draft that is often wrong does not pay";
    EXPECT_LT(dear.best_length(0.95, 8, 1), cheap_good);
    AcceptanceEstimate a;
    EXPECT_NEAR(a.alpha(), 0.8, 1e-9);
    for (int i = 0; i < 30; ++i) a.observe(4, 0);  // every draft refused at its first token
    EXPECT_LT(a.alpha(), 0.05);
    for (int i = 0; i < 30; ++i) a.observe(4, 4);  // then every one accepted
    EXPECT_GT(a.alpha(), 0.9);
}

// In the engine: a draft model as slow as the target backs off (speculation would cost time), one
// that costs nothing drafts fully; greedy output is the same in both. Step costs are on the
// engine's clock (FakeStepModel::step_cost), so the machine's load cannot change them.
TEST(DraftModelEngine, CostModelBacksOffADearDraft) {
    auto go = [](std::chrono::milliseconds draft_cost) {
        FakeStepModel target(kVocab, 512, 4, 1 << 20, periodic_logits);
        target.step_cost = std::chrono::milliseconds(4);
        auto draft = std::make_shared<FakeStepModel>(kVocab, 512, 4, 1 << 20, other_logits);
        draft->step_cost = draft_cost;
        EngineOptions options;
        options.speculative.draft_model = draft;
        options.speculative.max_draft = 6;
        EngineCore core(target, nullptr, options);
        Driver driver(core);
        driver.add(greedy_request(make_prompt(9, 5, kVocab), 60));
        driver.run();
        return std::pair{driver.results.at(1).choices.at(0).tokens, core.stats()};
    };
    const auto [dear_tokens, dear] = go(std::chrono::milliseconds(4));
    const auto [free_tokens, free] = go(std::chrono::milliseconds(0));
    EXPECT_EQ(dear_tokens, free_tokens);
    // A wrong draft as dear as the target: after the first verifications it pauses and probes.
    EXPECT_LT(dear.draft_tokens, 25);
    EXPECT_GT(free.draft_tokens, dear.draft_tokens);
}

// The fit behind both costs: exact on points of a line, decaying old points away.
TEST(DraftCostModel, LinearFitFollowsTheLatestLine) {
    DecayedLinearFit f;
    EXPECT_EQ(f.at(3), 0.0);
    for (int i = 0; i < 40; ++i) f.observe(double(1 + i % 5), 0.002 + 0.0003 * double(1 + i % 5));
    EXPECT_NEAR(f.slope(), 0.0003, 1e-12);
    EXPECT_NEAR(f.at(8), 0.002 + 0.0024, 1e-12);
    for (int i = 0; i < 400; ++i) f.observe(double(1 + i % 5), 0.004 + 0.0001 * double(1 + i % 5));
    EXPECT_NEAR(f.slope(), 0.0001, 1e-6);
    EXPECT_NEAR(f.at(2), 0.0042, 1e-6);
}

// A catch-up forward feeds a sequence's backlog (a whole prompt, or the steps it sat out) and is
// slow for its rows, not for the draft tokens it yields: it must not make drafting look dear.
TEST(DraftCostModel, CatchUpForwardsDoNotInflateTheDraftCost) {
    DraftCostModel m;
    for (int i = 0; i < 50; ++i) {
        m.observe_step(0.010 + 0.0005 * 1, 1, 1);
        m.observe_step(0.010 + 0.0005 * 5, 5, 1);
    }
    for (int i = 0; i < 20; ++i) {
        m.observe_draft(0.001 + 0.0002 * 300, 300);  // a 300-token catch-up: 61 ms
        for (int j = 0; j < 4; ++j) m.observe_draft(0.001 + 0.0002, 1);  // then four draft rounds
    }
    EXPECT_NEAR(m.draft_cost(1), 0.0012 / 0.0105, 1e-6);
    EXPECT_GE(m.best_length(0.9, 8, 1), 5);
}

// Whether any length pays at the best acceptance in sight: a draft forward as dear as the plain
// step never pays (T(k) = 1 + k >= E(k)), however good the drafts; a cheap one does.
TEST(DraftCostModel, CostsAloneCanForbidDrafting) {
    DraftCostModel m;
    EXPECT_TRUE(m.any_length_pays(0.95, 8, 8)) << "unmeasured costs count as zero";
    for (int i = 0; i < 50; ++i) {
        m.observe_step(0.008 + 0.0001 * 8, 8, 8);
        m.observe_step(0.008 + 0.0001 * 24, 24, 8);
        m.observe_draft(0.0088, 8);
    }
    EXPECT_FALSE(m.any_length_pays(0.999, 8, 8));
    for (int i = 0; i < 400; ++i) m.observe_draft(0.0004, 8);
    EXPECT_TRUE(m.any_length_pays(0.95, 8, 8));
}

// In the engine, eight sequences with a draft twice as dear as the target: after the first proposal
// measured it, nobody drafts or probes again (each probe would cost a draft forward and its
// catch-up, which is what made concurrency 8 lose a quarter of its speed); output is unchanged.
TEST(DraftModelEngine, NoProbesWhereCostsAloneForbidDrafting) {
    auto go = [](bool with_draft) {
        FakeStepModel target(kVocab, 1024, 4, 1 << 20, periodic_logits);
        target.step_cost = std::chrono::milliseconds(3);
        auto draft = std::make_shared<FakeStepModel>(kVocab, 1024, 4, 1 << 20, periodic_logits);
        draft->step_cost = std::chrono::milliseconds(6);
        EngineOptions options;
        if (with_draft) options.speculative.draft_model = draft;
        options.speculative.max_draft = 4;
        EngineCore core(target, nullptr, options);
        Driver driver(core);
        // Prompts that share no leading block: all eight are admitted in the first step (a shared
        // prefix would hold the others back a step for it, scheduler.h).
        for (int i = 0; i < 8; ++i) driver.add(greedy_request(make_prompt(9 + i, 6 + uint32_t(i), kVocab), 80));
        driver.run();
        std::vector<std::vector<int32_t>> out;
        for (const auto& [id, res] : driver.results) out.push_back(res.choices.at(0).tokens);
        return std::pair{out, with_draft ? core.drafter()->stats().forwards : 0};
    };
    const auto [plain, unused] = go(false);
    const auto [drafted, forwards] = go(true);
    EXPECT_EQ(drafted, plain);
    // The first proposal: one catch-up forward and three draft rounds, all eight sequences in each.
    // Two more forwards are allowed (the real microseconds around each step); probing every 16
    // steps would add at least four.
    EXPECT_LE(forwards, 6);
}

// A catch-up is paid once: it pays only where the tokens a sequence may still generate save more
// than it costs, and always while nothing is measured (the engine then sends one scout).
TEST(DraftCostModel, CatchUpPaysOnlyOverEnoughTokens) {
    DraftCostModel m;
    EXPECT_FALSE(m.measured());
    EXPECT_TRUE(m.catch_up_pays(0.9, 8, 8, 8, 500, 1)) << "unmeasured: the scout goes";
    for (int i = 0; i < 50; ++i) {  // a plain step of 8 sequences: 8.8 ms; a verified row 0.1 ms
        m.observe_step(0.008 + 0.0001 * 8, 8, 8);
        m.observe_step(0.008 + 0.0001 * 24, 24, 8);
        m.observe_draft(0.0005 + 0.00002 * 1, 1);    // a draft round of one row: 0.52 ms
        m.observe_draft(0.0005 + 0.00002 * 64, 64);  // a 64-token catch-up: 1.78 ms
    }
    ASSERT_TRUE(m.measured());
    const double rate = m.best_rate(0.9, 8, 8);
    ASSERT_GT(rate, 1.0);
    // With all 8 drafting, a plain token costs each 8.8 ms / 8 = 1.1 ms and drafting saves 1 - 1/rate of it.
    const double saved_per_token = 0.0011 * (1.0 - 1.0 / rate);
    // A catch-up must repay twice its cost (the estimates are young, and it cannot be taken back).
    const auto needed = int64_t(std::ceil(2 * (0.0005 + 0.00002 * 64) / saved_per_token));
    EXPECT_FALSE(m.catch_up_pays(0.9, 8, 8, 8, 64, needed - 2));
    EXPECT_TRUE(m.catch_up_pays(0.9, 8, 8, 8, 64, needed + 2));
    EXPECT_TRUE(m.catch_up_pays(0.9, 8, 8, 8, 1, 20)) << "a sequence already drafting has one token to feed";
    EXPECT_FALSE(m.catch_up_pays(0.05, 8, 8, 8, 64, 1000)) << "a length that does not pay saves nothing";
}

// The length is chosen for the sequences that draft: a draft forward that costs a third of the
// batch's plain step pays when all eight share it, not when one sequence drafts alone and the
// other seven wait through its forwards and verified rows.
TEST(DraftCostModel, ALoneDrafterInALargeBatchPaysTheWholeForward) {
    DraftCostModel m;
    for (int i = 0; i < 50; ++i) {
        m.observe_step(0.009 + 0.0001 * 8, 8, 8);   // plain: 9.8 ms for 8 sequences
        m.observe_step(0.009 + 0.0001 * 40, 40, 8);  // v = 0.1 ms a verified row
        m.observe_draft(0.0032 + 0.00001 * 1, 1);     // the draft reads its weights once a forward:
        m.observe_draft(0.0032 + 0.00001 * 8, 8);     // about 3.2 ms whatever its rows
    }
    EXPECT_GE(m.best_length(0.95, 8, 8), 3) << "shared by eight, the forward pays";
    EXPECT_GT(m.best_rate(0.95, 8, 8), 1.3);
    EXPECT_EQ(m.best_length(0.95, 8, 8, 1), 0) << "one drafter among eight: the forward is all cost";
    EXPECT_EQ(m.best_length(0.95, 8, 1), m.best_length(0.95, 8, 1, 1)) << "a lone sequence is all of its batch";
    // The default (every sequence drafts) is the explicit count.
    EXPECT_EQ(m.best_length(0.8, 8, 8), m.best_length(0.8, 8, 8, 8));
}

// Before the draft's costs are measured, one sequence drafts alone: the draft model's first forward
// feeds a single sequence's prompt, not all eight. Once measured, a cheap, always-right draft is
// worth its catch-up for the others too, and output never changes.
TEST(DraftModelEngine, OneScoutMeasuresBeforeTheOthersCatchUp) {
    FakeStepModel target(kVocab, 1024, 4, 1 << 20, periodic_logits);
    // 20 ms a step on the engine's clock, whatever its rows: a verified row costs nothing, as it
    // nearly does, and a free, always-right draft pays for every sequence. With real sleeps one
    // late wake-up while the fit was young (a 12-row step timed 10 ms long reads as 2.5 ms a
    // verified row) priced the others' catch-up out for good on two busy cores.
    target.step_cost = std::chrono::milliseconds(20);
    auto draft = std::make_shared<FakeStepModel>(kVocab, 1024, 4, 1 << 20, periodic_logits);
    EngineOptions options;
    options.speculative.draft_model = draft;
    options.speculative.max_draft = 4;
    EngineCore core(target, nullptr, options);
    Driver driver(core);
    std::vector<std::vector<int32_t>> expected;
    for (int i = 0; i < 8; ++i) {
        std::vector<int32_t> prompt = make_prompt(9 + i, uint32_t(40 + i), kVocab);
        driver.add(greedy_request(prompt, 48));
        for (int t = 0; t < 48; ++t) {  // what the target alone generates: periodic_logits' argmax
            std::vector<float> logits(kVocab);
            periodic_logits(prompt, logits.data(), kVocab);
            prompt.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        }
        expected.emplace_back(prompt.end() - 48, prompt.end());
    }
    driver.run();
    ASSERT_FALSE(draft->step_batches.empty());
    const model::Batch& first = draft->step_batches.front();
    EXPECT_EQ(first.block_tables.size(), 1u) << "the first draft forward catches up one sequence";
    EXPECT_EQ(first.size(), 10) << "the scout: the shortest prompt (9 tokens) and its first generated token";
    std::set<size_t> widths;
    size_t widest = 0;
    for (const model::Batch& b : draft->step_batches) {
        // Newcomers join at most as many a step as already draft: each width is measured first.
        EXPECT_LE(b.block_tables.size(), 2 * std::max<size_t>(1, widest)) << "the drafting group at most doubles";
        widest = std::max(widest, b.block_tables.size());
        widths.insert(b.block_tables.size());
    }
    EXPECT_GT(*widths.rbegin(), 1u) << "once measured, the others draft too";
    for (int i = 0; i < 8; ++i) EXPECT_EQ(driver.results.at(RequestId(i + 1)).choices.at(0).tokens, expected[size_t(i)]);
}

TEST(DraftModelEngine, RejectsBadOptions) {
    FakeStepModel target(kVocab, 16, 4);
    auto draft = std::make_shared<FakeStepModel>(kVocab, 16, 4);
    EngineOptions options;
    options.speculative.draft_model = draft;
    options.speculative.ngram_max = 2;
    EXPECT_THROW(EngineCore(target, nullptr, options), Error) << "one drafter at a time";
    options.speculative.ngram_max = 0;
    options.speculative.draft_max_step_tokens = 0;
    EXPECT_THROW(EngineCore(target, nullptr, options), Error);
}

// At temperature 1 the token after a drafted position keeps the target's distribution, whatever
// the draft proposes (here always token 1, which the target gives p = 0.25).
TEST(DraftModelEngine, SampledDistributionIsTheTargets) {
    constexpr int64_t vocab = 6;
    const std::array<double, vocab> p = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
    auto target_fn = [&](const std::vector<int32_t>&, float* logits, int64_t) {
        for (int64_t i = 0; i < vocab; ++i) logits[i] = float(std::log(p[size_t(i)]));
    };
    auto draft_fn = [](const std::vector<int32_t>&, float* logits, int64_t) {
        for (int64_t i = 0; i < vocab; ++i) logits[i] = i == 1 ? 10.0f : 0.0f;
    };
    FakeStepModel target(vocab, 4096, 4, 1 << 20, target_fn);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = 256, .max_seqs = 64};
    options.speculative.draft_model = std::make_shared<FakeStepModel>(vocab, 4096, 4, 1 << 20, draft_fn);
    options.speculative.max_draft = 3;
    options.speculative.draft_length_by_cost = false;
    EngineCore core(target, nullptr, options);
    Driver driver(core);
    constexpr int n = 800;
    for (int i = 0; i < n; ++i) {
        Request r;
        r.prompt = {0, 1, 2};
        r.sampling.temperature = 1.0f;
        r.sampling.seed = uint64_t(i) + 1;
        r.stop.max_tokens = 7;
        driver.add(std::move(r));
    }
    driver.run();
    EXPECT_GT(core.stats().draft_tokens, n);
    // Tokens 2..7 of each output were verified drafts (token 1 is sampled from the prefill).
    std::array<int64_t, vocab> counts{};
    int64_t total = 0;
    for (const auto& [id, res] : driver.results) {
        const auto& t = res.choices.at(0).tokens;
        ASSERT_EQ(t.size(), 7u);
        for (size_t j = 1; j < t.size(); ++j, ++total) ++counts[size_t(t[j])];
    }
    double chi2 = 0;
    for (int64_t i = 0; i < vocab; ++i) {
        const double expected = p[size_t(i)] * double(total);
        chi2 += (double(counts[size_t(i)]) - expected) * (double(counts[size_t(i)]) - expected) / expected;
    }
    EXPECT_LT(chi2, 25.0) << "5 degrees of freedom: 25 is p < 0.0002";  // a biased rule gives thousands
}

// Real forward passes: an F16 copy of an F32 random model drafts for it. Greedy output is the
// F32 model's own, token for token, at batch 1 and 16; most drafts are accepted.
TEST(DraftModelEngine, RandomModelWithAnF16Draft) {
    model::RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 96; spec.vocab_size = 300;
    const std::string target_path = pagoda::test::temp_path("draft_target.gguf");
    const std::string draft_path = pagoda::test::temp_path("draft_f16.gguf");
    model::write_random_model(spec, nullptr, target_path);
    spec.type = gguf::GgmlType::F16;
    model::write_random_model(spec, nullptr, draft_path);
    // Lengths by the acceptance rule (by_cost false) make every batch draft, whatever this host's
    // timings; one run by measured cost checks the cost model's choices change nothing either.
    auto go = [&](bool speculate, int32_t max_seqs, bool by_cost = false) {
        auto m = model::open_step_model(target_path, {.threads = 2, .kv = {.block_size = 4}, .tokens_wanted = 4096});
        EngineOptions options;
        options.scheduler = {.max_batched_tokens = 128, .max_seqs = max_seqs};
        if (speculate) {
            options.speculative.draft_model =
                model::open_step_model(draft_path, {.threads = 2, .kv = {.block_size = 8}, .tokens_wanted = 4096});
            options.speculative.max_draft = 4;
            options.speculative.draft_length_by_cost = by_cost;
        }
        EngineCore core(*m, nullptr, options);
        Driver driver(core);
        for (int i = 0; i < 32; ++i) driver.add(greedy_request(make_prompt(4 + i % 5, uint32_t(i), 300), 24));
        driver.run();
        std::map<RequestId, std::vector<int32_t>> out;
        for (const auto& [id, r] : driver.results) out[id] = r.choices.at(0).tokens;
        return std::pair{out, core.stats()};
    };
    const auto [plain, plain_stats] = go(false, 32);
    for (int32_t batch : {1, 8, 32}) {
        const auto [tokens, stats] = go(true, batch);
        EXPECT_EQ(tokens, plain) << "batch " << batch;
        EXPECT_GT(stats.draft_tokens, 0);
        EXPECT_GT(stats.accepted_draft_tokens * 2, stats.draft_tokens) << "an F16 copy mostly agrees";
    }
    EXPECT_EQ(go(true, 32, /*by_cost=*/true).first, plain) << "lengths by measured cost";
}

}  // namespace
}  // namespace pagoda::engine
