// Scheduler plans checked step by step against its contract (pure logic: a BlockManager, no model).
#include "engine/scheduler.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <set>

#include "core/error.h"

namespace pagoda::engine {
namespace {

struct Sim {
    kv::BlockManager blocks;
    Scheduler sched;
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::map<Sequence*, int> generated;
    std::vector<uint64_t> admission_arrivals;  // arrival of each first admission, in order

    Sim(int32_t n_blocks, int32_t block_size, SchedulerConfig config)
        : blocks(n_blocks, block_size), sched(config, blocks) {}

    Sequence* add(int64_t prompt_len, int32_t priority = 0) {
        std::vector<int32_t> tokens;
        const int64_t id = int64_t(seqs.size()) + 1;
        for (int64_t i = 0; i < prompt_len; ++i) tokens.push_back(int32_t((id * 31 + i) % 97));
        return add_tokens(std::move(tokens), priority);
    }
    Sequence* add_tokens(std::vector<int32_t> tokens, int32_t priority = 0) {
        auto s = std::make_unique<Sequence>();
        s->id = int64_t(seqs.size()) + 1;
        s->arrival = seqs.size() + 1;
        s->priority = priority;
        s->tokens = std::move(tokens);
        s->n_prompt = int64_t(s->tokens.size());
        sched.add(s.get());
        seqs.push_back(std::move(s));
        return seqs.back().get();
    }

    // One step: checks the plan's invariants, then "samples" a token for each logits chunk and
    // finishes sequences after `output_len` tokens.
    void step(int output_len) {
        std::set<Sequence*> decode_ready;
        for (Sequence* s : sched.running())
            if (blocks.num_tokens(s->id) < int64_t(s->tokens.size())) decode_ready.insert(s);
        std::set<uint64_t> admitted_before;
        for (Sequence* s : sched.running()) admitted_before.insert(s->admitted);

        StepPlan plan = sched.schedule();
        const auto& config = sched.config();
        ASSERT_LE(plan.n_tokens, config.max_batched_tokens);
        int64_t sum = 0;
        bool seen_prefill = false;
        for (const auto& c : plan.chunks) {
            ASSERT_LT(c.begin, c.end);
            sum += c.end - c.begin;
            const bool is_decode = decode_ready.count(c.seq) != 0;
            if (is_decode) EXPECT_FALSE(seen_prefill) << "a decode was scheduled after a prefill chunk";
            else seen_prefill = true;
            EXPECT_EQ(c.logits, c.end == int64_t(c.seq->tokens.size()));
            if (!admitted_before.count(c.seq->admitted) && c.seq->n_preemptions == 0 && c.begin == 0)
                admission_arrivals.push_back(c.seq->arrival);
        }
        EXPECT_EQ(sum, plan.n_tokens);
        // Every decode-ready sequence not preempted this step decodes now.
        for (Sequence* s : decode_ready) {
            if (std::find(plan.preempted.begin(), plan.preempted.end(), s) != plan.preempted.end()) continue;
            EXPECT_TRUE(std::any_of(plan.chunks.begin(), plan.chunks.end(), [&](const auto& c) { return c.seq == s; }))
                << "running sequence " << s->id << " skipped a step";
        }
        EXPECT_LE(sched.seats_in_use(), config.max_seqs);
        sched.complete(plan);
        for (const auto& c : plan.chunks) {
            if (!c.logits) continue;
            c.seq->tokens.push_back(int32_t((c.seq->tokens.size() * 7) % 97));
            if (++generated[c.seq] == output_len) sched.remove(c.seq);
        }
    }
    int run(int output_len, int max_steps = 10000) {
        int n = 0;
        while (sched.has_work() && n++ < max_steps) step(output_len);
        return n;
    }
};

TEST(Scheduler, BudgetDecodeFirstAndFcfsAdmission) {
    Sim sim(256, 4, {.max_batched_tokens = 16, .max_seqs = 4});
    for (int64_t len : {30, 3, 7, 50, 2, 9, 64, 1, 17}) sim.add(len);
    sim.run(6);
    EXPECT_FALSE(sim.sched.has_work());
    ASSERT_EQ(sim.admission_arrivals.size(), 9u);
    EXPECT_TRUE(std::is_sorted(sim.admission_arrivals.begin(), sim.admission_arrivals.end()))
        << "FCFS admitted out of arrival order";
    EXPECT_EQ(sim.blocks.num_used_blocks(), 0);
    EXPECT_EQ(sim.sched.preemptions(), 0);
}

TEST(Scheduler, LongPromptIsChunkedAndNeverStallsDecodes) {
    Sim sim(256, 8, {.max_batched_tokens = 8, .max_seqs = 4});
    sim.add(3);
    sim.add(2);
    sim.step(100);  // both admitted (5 tokens)
    sim.add(200);   // long prompt: 200 tokens at most 6 per step beside 2 decodes
    int steps = 0;
    while (sim.blocks.has_sequence(3) ? sim.blocks.num_computed(3) < 200 : true) {
        sim.step(100);
        ASSERT_LT(++steps, 200);
    }
    EXPECT_GE(steps, 200 / 6);  // chunked: the decodes kept their share every step
}

TEST(Scheduler, PriorityPolicyOrdersAdmissions) {
    Sim sim(256, 4, {.max_batched_tokens = 64, .max_seqs = 1, .policy = SchedulingPolicy::priority});
    sim.add(4, 5);
    sim.add(4, 2);
    sim.add(4, 9);
    sim.add(4, 2);
    sim.add(4, -1);
    sim.run(3);
    // All were queued before the first step: priority order (lower first), ties by arrival.
    std::vector<uint64_t> want = {5, 2, 4, 1, 3};
    EXPECT_EQ(sim.admission_arrivals, want);
}

TEST(Scheduler, PreemptsNewestAndRequeuesAtFront) {
    // 6 blocks of 4 = 24 tokens; three sequences of 6-token prompts growing by 10 each cannot all fit.
    Sim sim(6, 4, {.max_batched_tokens = 32, .max_seqs = 3, .kv_watermark = 0});
    Sequence* a = sim.add(6);
    Sequence* b = sim.add(6);
    Sequence* c = sim.add(6);
    bool saw = false;
    for (int i = 0; i < 200 && sim.sched.has_work(); ++i) {
        const int64_t before = sim.sched.preemptions();
        sim.step(10);
        if (sim.sched.preemptions() > before && !saw) {
            saw = true;
            // The newest admission (c) went first, to the front of the queue.
            ASSERT_FALSE(sim.sched.waiting().empty());
            EXPECT_EQ(sim.sched.waiting().front(), c);
            EXPECT_EQ(a->status, SeqStatus::running);
        }
    }
    EXPECT_TRUE(saw);
    EXPECT_FALSE(sim.sched.has_work());
    EXPECT_EQ(sim.generated[a], 10);
    EXPECT_EQ(sim.generated[b], 10);
    EXPECT_EQ(sim.generated[c], 10);
    EXPECT_EQ(sim.blocks.num_used_blocks(), 0);
}

// Requests that arrive together with one prompt prefix: the first computes it, the others wait a
// step for it and then take it from the prefix cache (computing only their own tokens); a request
// behind them waits too (the queue head blocks). Without defer_shared_prefix all are admitted at
// once and each computes the prefix.
TEST(Scheduler, SharedPromptPrefixIsComputedOnce) {
    for (bool defer : {true, false}) {
        SCOPED_TRACE(defer ? "defer" : "no defer");
        SchedulerConfig config{.max_batched_tokens = 256, .max_seqs = 8};
        config.defer_shared_prefix = defer;
        Sim sim(64, 4, config);
        std::vector<int32_t> prefix = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};  // 3 whole blocks and 2
        auto prompt = [&](int32_t tail) {
            std::vector<int32_t> t = prefix;
            for (int i = 0; i < 5; ++i) t.push_back(tail + i);
            return t;
        };
        Sequence* a = sim.add_tokens(prompt(40));
        Sequence* b = sim.add_tokens(prompt(50));
        Sequence* c = sim.add_tokens(prompt(60));
        Sequence* d = sim.add_tokens({90, 91, 92, 93, 94, 95});  // shares nothing
        StepPlan first = sim.sched.schedule();
        if (defer) {
            ASSERT_EQ(first.chunks.size(), 1u);
            EXPECT_EQ(first.chunks[0].seq, a);
            EXPECT_EQ(first.n_prefill_tokens, 19);
        } else {
            EXPECT_EQ(first.chunks.size(), 4u);
            EXPECT_EQ(first.n_prefill_tokens, 3 * 19 + 6);
        }
        sim.sched.complete(first);
        for (const auto& ch : first.chunks) ch.seq->tokens.push_back(1);  // each samples a token
        if (!defer) continue;
        StepPlan second = sim.sched.schedule();
        // a decodes; b and c start after the 3 cached blocks (12 tokens); d from 0.
        std::map<Sequence*, int64_t> begin;
        for (const auto& ch : second.chunks) begin[ch.seq] = ch.begin;
        ASSERT_EQ(begin.size(), 4u);
        EXPECT_EQ(begin[a], 19);
        EXPECT_EQ(begin[b], 12);
        EXPECT_EQ(begin[c], 12);
        EXPECT_EQ(begin[d], 0);
        EXPECT_EQ(second.n_prefill_tokens, 7 + 7 + 6);
        sim.sched.complete(second);
    }
}

// The same prompt prefix under another prefix key (another LoRA adapter) is never shared, so a
// request does not wait for a running one of another key to compute it: both start in one step.
TEST(Scheduler, SharedPrefixUnderAnotherKeyDoesNotWait) {
    Sim sim(64, 4, {.max_batched_tokens = 256, .max_seqs = 8});
    std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    Sequence* a = sim.add_tokens(prompt);
    Sequence* b = sim.add_tokens(prompt);
    Sequence* c = sim.add_tokens(prompt);
    a->prefix_key = 11;
    b->prefix_key = 22;
    c->prefix_key = 11;  // a's key: waits for a's blocks
    StepPlan first = sim.sched.schedule();
    ASSERT_EQ(first.chunks.size(), 2u);
    EXPECT_EQ(first.chunks[0].seq, a);
    EXPECT_EQ(first.chunks[1].seq, b);
    EXPECT_EQ(first.chunks[1].begin, 0);
    EXPECT_EQ(first.n_prefill_tokens, 20);
    sim.sched.complete(first);
}

// A prompt whose shared blocks are computed already is admitted at once (nothing to wait for),
// even while the sequence that computed them still decodes.
TEST(Scheduler, SharedPrefixAlreadyCachedIsAdmittedAtOnce) {
    Sim sim(64, 4, {.max_batched_tokens = 256, .max_seqs = 8});
    std::vector<int32_t> p1 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    Sequence* a = sim.add_tokens(p1);
    sim.step(100);  // a computes its prompt (2 whole blocks published)
    std::vector<int32_t> p2 = {1, 2, 3, 4, 5, 6, 7, 8, 20, 21};
    Sequence* b = sim.add_tokens(p2);
    StepPlan plan = sim.sched.schedule();
    ASSERT_EQ(plan.chunks.size(), 2u);
    EXPECT_EQ(plan.chunks[0].seq, a);
    EXPECT_EQ(plan.chunks[1].seq, b);
    EXPECT_EQ(plan.chunks[1].begin, 8);
    sim.sched.complete(plan);
}

TEST(Scheduler, RejectsBudgetBelowMaxSeqs) {
    kv::BlockManager blocks(8, 4);
    EXPECT_THROW(Scheduler({.max_batched_tokens = 4, .max_seqs = 8}, blocks), Error);
    EXPECT_THROW(Scheduler({.max_batched_tokens = 4, .max_seqs = 0}, blocks), Error);
}

}  // namespace
}  // namespace pagoda::engine
