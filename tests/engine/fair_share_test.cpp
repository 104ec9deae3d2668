// The fair-share policy, simulated step by step on the scheduler alone (a BlockManager, no model):
//   - with one tenant it plans exactly what FCFS plans, preemptions included;
//   - backlogged tenants get tokens in proportion to their weights (within 10 %);
//   - a quiet tenant beside a flooding one waits at most one request's length for a seat, where
//     FCFS makes it wait behind the whole flood;
//   - priority classes come first, and preemption takes the tenant furthest ahead.
#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/scheduler.h"

#include <fmt/format.h>

namespace pagoda::engine {
namespace {

struct Arrival {
    int64_t step = 0;  // submitted before this step's plan
    uint32_t tenant = 0;
    double weight = 1;
    int32_t priority = 0;
    int64_t prompt = 8, output = 8;
};

struct Outcome {
    std::map<uint32_t, int64_t> tokens;          // computed per tenant over the window
    std::map<uint32_t, std::vector<int64_t>> ttft;  // steps from arrival to first token, per tenant
    std::vector<std::string> trace;              // every plan, for comparisons
    int64_t preemptions = 0;
};

// Runs the arrivals to completion (or `window` steps) and records what each tenant got.
Outcome simulate(SchedulerConfig config, int32_t n_blocks, const std::vector<Arrival>& arrivals, int64_t window = 1 << 30) {
    kv::BlockManager blocks(n_blocks, 4);
    Scheduler sched(config, blocks);
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::map<Sequence*, const Arrival*> spec;
    std::map<Sequence*, int64_t> generated;
    Outcome out;
    size_t next = 0;
    for (int64_t step = 0; step < window && (next < arrivals.size() || sched.has_work()); ++step) {
        for (; next < arrivals.size() && arrivals[next].step <= step; ++next) {
            const Arrival& a = arrivals[next];
            auto s = std::make_unique<Sequence>();
            s->id = int64_t(seqs.size()) + 1;
            s->arrival = seqs.size() + 1;
            s->tenant = a.tenant, s->weight = a.weight, s->priority = a.priority;
            for (int64_t i = 0; i < a.prompt; ++i) s->tokens.push_back(int32_t((s->id * 131 + i * 7) % 1000));
            s->n_prompt = a.prompt;
            spec[s.get()] = &a;
            sched.add(s.get());
            seqs.push_back(std::move(s));
        }
        StepPlan plan = sched.schedule();
        std::string line;
        for (const auto& c : plan.chunks) line += fmt::format("{}:{}-{} ", c.seq->id, c.begin, c.end);
        for (const Sequence* p : plan.preempted) line += fmt::format("p{} ", p->id);
        out.trace.push_back(line);
        sched.complete(plan);
        for (const auto& c : plan.chunks) {
            out.tokens[c.seq->tenant] += c.end - c.begin;
            if (!c.logits) continue;
            Sequence* s = c.seq;
            if (generated[s] == 0 && s->n_preemptions == 0)
                out.ttft[s->tenant].push_back(step - spec[s]->step);
            s->tokens.push_back(int32_t((s->tokens.size() * 7) % 1000));
            if (++generated[s] == spec[s]->output) sched.remove(s);
        }
    }
    out.preemptions = sched.preemptions();
    return out;
}

double share(const Outcome& o, uint32_t tenant) {
    int64_t all = 0;
    for (const auto& [t, n] : o.tokens) all += n;
    return double(o.tokens.count(tenant) ? o.tokens.at(tenant) : 0) / double(all);
}

TEST(FairShare, OneTenantPlansExactlyWhatFcfsPlans) {
    std::mt19937 rng(7);
    std::vector<Arrival> arrivals;
    int64_t step = 0;
    for (int i = 0; i < 120; ++i) {
        step += std::uniform_int_distribution<int>(0, 2)(rng);
        arrivals.push_back({.step = step, .tenant = 3, .weight = 2.5,
                            .prompt = std::uniform_int_distribution<int>(1, 40)(rng),
                            .output = std::uniform_int_distribution<int>(1, 30)(rng)});
    }
    SchedulerConfig fcfs{.max_batched_tokens = 32, .max_seqs = 6, .policy = SchedulingPolicy::fcfs};
    SchedulerConfig fair = fcfs;
    fair.policy = SchedulingPolicy::fair;
    // A pool small enough that decodes preempt: the victims must be the same too.
    const Outcome a = simulate(fcfs, 40, arrivals), b = simulate(fair, 40, arrivals);
    EXPECT_GT(a.preemptions, 0) << "the pool never filled: the comparison did not cover preemption";
    ASSERT_EQ(a.trace.size(), b.trace.size());
    for (size_t i = 0; i < a.trace.size(); ++i) ASSERT_EQ(a.trace[i], b.trace[i]) << "step " << i;
}

// Two backlogged tenants (each with 200 requests waiting from the start): over the window the
// tokens they get follow their weights.
void expect_shares(double w1, double w2) {
    std::vector<Arrival> arrivals;
    for (int i = 0; i < 200; ++i) {  // more than the window serves: both stay backlogged
        arrivals.push_back({.step = 0, .tenant = 1, .weight = w1, .prompt = 12, .output = 16});
        arrivals.push_back({.step = 0, .tenant = 2, .weight = w2, .prompt = 12, .output = 16});
    }
    SchedulerConfig config{.max_batched_tokens = 64, .max_seqs = 8, .policy = SchedulingPolicy::fair};
    const Outcome o = simulate(config, 1024, arrivals, 300);
    const double want1 = w1 / (w1 + w2), want2 = w2 / (w1 + w2);
    EXPECT_NEAR(share(o, 1), want1, 0.1 * want1) << "weights " << w1 << ":" << w2;
    EXPECT_NEAR(share(o, 2), want2, 0.1 * want2) << "weights " << w1 << ":" << w2;
}

TEST(FairShare, BackloggedTenantsGetTokensInProportionToTheirWeights) {
    expect_shares(1, 1);
    expect_shares(3, 1);
    expect_shares(1, 4);
}

// One tenant floods (200 requests at step 0); the quiet one sends a request, waits for its answer,
// then sends the next. Its time to first token stays within one request's length of what it gets
// alone; under FCFS it waits behind the flood.
TEST(FairShare, AQuietTenantBesideAFloodWaitsAtMostOneRequestForASeat) {
    const int64_t output = 20;
    std::vector<Arrival> flood, quiet;
    for (int i = 0; i < 200; ++i) flood.push_back({.step = 0, .tenant = 1, .prompt = 16, .output = output});
    for (int i = 0; i < 8; ++i) quiet.push_back({.step = 5 + i * 60, .tenant = 2, .prompt = 16, .output = output});
    std::vector<Arrival> both = flood;
    both.insert(both.end(), quiet.begin(), quiet.end());
    std::stable_sort(both.begin(), both.end(), [](const Arrival& a, const Arrival& b) { return a.step < b.step; });

    SchedulerConfig fair{.max_batched_tokens = 64, .max_seqs = 4, .policy = SchedulingPolicy::fair};
    SchedulerConfig fcfs = fair;
    fcfs.policy = SchedulingPolicy::fcfs;
    const Outcome alone = simulate(fair, 1024, quiet);
    const Outcome shared = simulate(fair, 1024, both);
    const Outcome first_come = simulate(fcfs, 1024, both);
    ASSERT_EQ(alone.ttft.at(2).size(), quiet.size());
    ASSERT_EQ(shared.ttft.at(2).size(), quiet.size());
    const int64_t alone_worst = *std::max_element(alone.ttft.at(2).begin(), alone.ttft.at(2).end());
    for (int64_t t : shared.ttft.at(2)) EXPECT_LE(t, alone_worst + output + 1);
    const int64_t fcfs_first = first_come.ttft.at(2).front();
    EXPECT_GT(fcfs_first, 10 * (alone_worst + output)) << "FCFS did not make the quiet tenant wait: the test shows nothing";
}

TEST(FairShare, ABetterPriorityClassGoesFirstWhateverItsTenantHasHad) {
    std::vector<Arrival> arrivals;
    for (int i = 0; i < 20; ++i) arrivals.push_back({.step = 0, .tenant = 1, .prompt = 8, .output = 8});
    // Tenant 1 has been served for 30 steps when its priority -1 request arrives beside tenant 2's.
    arrivals.push_back({.step = 30, .tenant = 2, .prompt = 8, .output = 8});
    arrivals.push_back({.step = 30, .tenant = 1, .priority = -1, .prompt = 8, .output = 8});
    SchedulerConfig config{.max_batched_tokens = 64, .max_seqs = 2, .policy = SchedulingPolicy::fair};
    const Outcome o = simulate(config, 1024, arrivals);
    // The priority request is sequence 22, tenant 2's is 21: 22 must be admitted first (an earlier
    // step, or earlier in the same step's admissions).
    auto admitted = [&](const std::string& id) {
        for (size_t i = 0; i < o.trace.size(); ++i)
            if (size_t at = (" " + o.trace[i]).find(" " + id + ":0-"); at != std::string::npos) return std::pair(i, at);
        return std::pair(o.trace.size(), size_t(0));
    };
    ASSERT_LT(admitted("22").first, o.trace.size());
    ASSERT_LT(admitted("21").first, o.trace.size());
    EXPECT_LT(admitted("22"), admitted("21"));
}

TEST(FairShare, PreemptionTakesTheTenantFurthestAhead) {
    kv::BlockManager blocks(12, 4);
    Scheduler sched({.max_batched_tokens = 64, .max_seqs = 4, .policy = SchedulingPolicy::fair}, blocks);
    std::vector<std::unique_ptr<Sequence>> seqs;
    auto add = [&](uint32_t tenant, int64_t len) {
        auto s = std::make_unique<Sequence>();
        s->id = int64_t(seqs.size()) + 1, s->arrival = seqs.size() + 1, s->tenant = tenant;
        for (int64_t i = 0; i < len; ++i) s->tokens.push_back(int32_t(s->id * 100 + i));
        s->n_prompt = len;
        sched.add(s.get());
        seqs.push_back(std::move(s));
        return seqs.back().get();
    };
    // Both tenants active from the start; tenant 1's is older and its long prompt puts it far
    // ahead. FCFS would preempt the newest (tenant 2's); fair takes tenant 1's.
    Sequence* heavy = add(1, 24);
    Sequence* light = add(2, 8);
    StepPlan p = sched.schedule();
    sched.complete(p);
    ASSERT_EQ(sched.num_running(), 2u);
    ASSERT_LT(heavy->admitted, light->admitted);
    // Decode until the 12-block pool is full: the victim is tenant 1's sequence although it is older.
    for (int step = 0; step < 40 && sched.preemptions() == 0; ++step) {
        for (Sequence* s : {heavy, light})
            if (s->status == SeqStatus::running) s->tokens.push_back(1);
        p = sched.schedule();
        sched.complete(p);
    }
    ASSERT_GT(sched.preemptions(), 0);
    EXPECT_EQ(heavy->n_preemptions, 1);
    EXPECT_EQ(light->n_preemptions, 0);
    EXPECT_GT(sched.served_tokens(1), sched.served_tokens(2));
}

TEST(FairShare, PolicyNamesRoundTripAndUnknownOnesAreRefused) {
    for (auto p : {SchedulingPolicy::fcfs, SchedulingPolicy::priority, SchedulingPolicy::fair})
        EXPECT_EQ(parse_scheduling_policy(scheduling_policy_name(p)), p);
    EXPECT_THROW(parse_scheduling_policy("wfq"), Error);
}

}  // namespace
}  // namespace pagoda::engine
