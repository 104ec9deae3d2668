// The determinism guarantee (docs/api.md "Guarantees") for seeded sampled output: a request's tokens
// are a function of (model, prompt, parameters, seed) alone. 100 seeded requests with assorted
// temperatures, cuts and penalties must give the same tokens run alone, in random batches with
// random arrival, under forced preemption (a tiny KV pool), with the prefix cache warm and cold,
// with prompt-lookup speculation (drafts both accepted and refused), and as choices of n > 1; on
// the real model also with a draft model and with the prefix cache's host tier serving evicted
// blocks back.
// On the fake step model the expected tokens come from an independent reference (the keyed sampler
// over the logits of each context, no engine); on the real random model from each request run alone.
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <gtest/gtest.h>

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

constexpr int64_t kVocab = 64;
constexpr int kRequests = 100;

// hashed_logits, except that the token 7 positions back gets logit 6: under sampling it is drawn
// about half the time, so prompt-lookup drafts are sometimes right and sometimes refused.
void half_copy_logits(const std::vector<int32_t>& context, float* logits, int64_t vocab) {
    test::hashed_logits(context, logits, vocab);
    if (context.size() >= 7) logits[context[context.size() - 7]] = 6.0f;
}

// Request i: seeded, sampled, with parameters that vary over the set. Every fourth prompt extends
// the previous one (prefix-cache hits); prompts repeat a phrase so lookups find drafts.
Request sampled_request(uint32_t i, int64_t vocab, int32_t n = 1) {
    Request r;
    std::vector<int32_t> phrase = test::make_prompt(3 + i % 5, i, vocab);
    for (int k = 0; k < 3; ++k) r.prompt.insert(r.prompt.end(), phrase.begin(), phrase.end());
    if (i % 4 == 3) {
        Request prev = sampled_request(i - 1, vocab);
        r.prompt.insert(r.prompt.begin(), prev.prompt.begin(), prev.prompt.end());
    }
    r.n = n;
    r.sampling.temperature = 0.6f + 0.2f * float(i % 5);
    if (i % 3 == 1) r.sampling.top_p = 0.9f;
    if (i % 4 == 2) r.sampling.top_k = 20;
    if (i % 5 == 3) r.sampling.min_p = 0.05f;
    if (i % 7 == 0) r.sampling.frequency_penalty = 0.4f;
    r.sampling.seed = 1000 + uint64_t(i) * 7919;
    r.stop.max_tokens = 6 + i % 11;
    return r;
}

struct Scenario {
    const char* name;
    int32_t max_seqs = 32;
    int64_t budget = 64;
    int32_t n_blocks = 4096;  // of 4 tokens
    bool prefix_caching = true;
    bool draft = false;
    int32_t n = 1;
    bool warm = false;  // run every request once first, so the second pass hits the prefix cache
    bool draft_model = false;     // speculation with a draft model (run()'s make_draft)
    uint64_t tier_host_bytes = 0;  // > 0: the prefix cache's host tier behind the pool
};

using Outputs = std::map<std::pair<uint32_t, int32_t>, std::vector<int32_t>>;  // (request, choice) -> tokens

// Runs the requests through one engine over `model`, arriving at random steps (seeded by `order`).
template <class MakeModel>
Outputs run(MakeModel make_model, const Scenario& sc, uint32_t order, EngineStats* stats = nullptr,
            const std::function<std::shared_ptr<model::StepModel>()>& make_draft = {}) {
    auto model = make_model(sc);
    EngineOptions options;
    options.scheduler = {.max_batched_tokens = sc.budget, .max_seqs = sc.max_seqs};
    options.prefix_caching = sc.prefix_caching;
    options.prefix_tier.host_bytes = sc.tier_host_bytes;
    if (sc.draft) options.speculative = {.ngram_max = 3, .ngram_min = 1, .max_draft = 4};
    if (sc.draft_model) options.speculative = {.max_draft = 4, .draft_model = make_draft()};
    if (sc.draft || sc.draft_model)
        options.speculative.draft_length_by_cost = false;  // lengths by rule: timings would be noise
    EngineCore core(*model, nullptr, options);
    Driver driver(core);
    const int64_t vocab = model->info().vocab_size;
    std::mt19937 rng(order);
    for (int pass = sc.warm ? 0 : 1; pass < 2; ++pass) {
        std::vector<uint32_t> ids(kRequests);
        for (uint32_t i = 0; i < kRequests; ++i) ids[i] = i;
        std::shuffle(ids.begin(), ids.end(), rng);
        std::map<RequestId, uint32_t> of;
        size_t next = 0;
        while (next < ids.size() || core.has_work()) {
            // 0-5 arrivals a step: batches of every size and composition, prompts mid-decode.
            for (int k = int(rng() % 6); k > 0 && next < ids.size(); --k, ++next)
                of[driver.add(sampled_request(ids[next], vocab, sc.n))] = ids[next];
            core.step();
            driver.collect();
        }
        if (pass == 0) continue;
        Outputs out;
        for (const auto& [id, i] : of) {
            const auto& res = driver.results.at(id);
            EXPECT_TRUE(res.done) << sc.name << " request " << i;
            for (const auto& [index, c] : res.choices) {
                EXPECT_TRUE(c.error.empty()) << c.error;
                out[{i, index}] = c.tokens;
            }
        }
        if (stats) *stats = core.stats();
        EXPECT_EQ(core.blocks().num_used_blocks(), 0);
        return out;
    }
    return {};
}

const std::vector<Scenario>& scenarios() {
    static const std::vector<Scenario> all = {
        {.name = "random batches"},
        {.name = "one at a time", .max_seqs = 1},
        {.name = "tiny budget", .max_seqs = 4, .budget = 7},
        {.name = "tiny pool (preemption)", .max_seqs = 16, .n_blocks = 40},
        {.name = "prefix cache cold", .prefix_caching = false},
        {.name = "prefix cache warm", .warm = true},
        {.name = "prompt-lookup drafts", .draft = true},
        {.name = "drafts under preemption", .max_seqs = 16, .n_blocks = 40, .draft = true},
        {.name = "n = 3", .n = 3},
        {.name = "n = 3 with drafts, preempted", .max_seqs = 16, .n_blocks = 60, .draft = true, .n = 3},
    };
    return all;
}

TEST(Determinism, SeededSampledOutputsMatchTheReferenceInEveryScenario) {
    auto fake = [](const Scenario& sc) {
        return std::make_unique<FakeStepModel>(kVocab, sc.n_blocks, 4, 1 << 20, half_copy_logits);
    };
    for (const Scenario& sc : scenarios()) {
        SCOPED_TRACE(sc.name);
        EngineStats stats;
        const Outputs got = run(fake, sc, 17, &stats);
        ASSERT_EQ(got.size(), size_t(kRequests * sc.n));
        for (const auto& [key, tokens] : got) {
            const Request r = sampled_request(key.first, kVocab, sc.n);
            ASSERT_EQ(tokens, test::reference_sampled(r.prompt, r.stop.max_tokens, r.sampling, uint64_t(key.second),
                                                      kVocab, half_copy_logits))
                << "request " << key.first << " choice " << key.second;
        }
        if (sc.n_blocks < 100) {
            EXPECT_GT(stats.preemptions, 0);
        }
        if (sc.draft) {
            EXPECT_GT(stats.accepted_draft_tokens, 0);
            EXPECT_LT(stats.accepted_draft_tokens, stats.draft_tokens);  // some refused
        }
        if (sc.warm) {
            EXPECT_GT(stats.prefix_hit_tokens, 0);
        }
    }
}

std::string random_model_path() {
    static const std::string path = [] {
        model::RandomModelSpec spec;  // 2 layers, dim 64, 4 heads, 2 KV heads
        spec.vocab_size = 300;
        spec.seed = 11;
        const std::string p = pagoda::test::temp_path("determinism-random.gguf");
        model::write_random_model(spec, nullptr, p);
        return p;
    }();
    return path;
}

// The real forward pass: every scenario gives each request's tokens as it gets them alone.
TEST(Determinism, RandomModelSeededSampledOutputsAreTheSameAloneAndInEveryScenario) {
    const std::string path = random_model_path();
    auto real = [&](const Scenario& sc) {
        return model::open_step_model(path, {.threads = 1, .kv = {.block_size = 4}, .tokens_wanted = int64_t(sc.n_blocks) * 4,
                                             .max_step_tokens = sc.budget});
    };
    const Outputs alone = run(real, {.name = "alone", .max_seqs = 1, .prefix_caching = false}, 1);
    ASSERT_EQ(alone.size(), size_t(kRequests));
    // Sampled, not greedy in disguise: another seed gives other tokens for most requests.
    int differ = 0;
    for (uint32_t i = 0; i < 10; ++i) {
        Request other = sampled_request(i, 300);
        other.sampling.seed = *other.sampling.seed + 1;
        auto m = real(Scenario{.name = "other seed"});
        EngineCore core(*m, nullptr, {});
        Driver driver(core);
        const RequestId id = driver.add(other);
        driver.run();
        differ += driver.results[id].choices[0].tokens != alone.at({i, 0});
    }
    EXPECT_GT(differ, 5);
    for (const Scenario& sc : scenarios()) {
        SCOPED_TRACE(sc.name);
        EngineStats stats;
        const Outputs got = run(real, sc, 23, &stats);
        ASSERT_EQ(got.size(), size_t(kRequests * sc.n));
        for (const auto& [key, tokens] : got) {
            if (key.second == 0) {
                ASSERT_EQ(tokens, alone.at({key.first, 0})) << "request " << key.first;
            }
        }
        if (sc.n > 1) {
            // Choices other than 0 against the same request run with n = 3 alone.
            static const Outputs alone_n3 = run(real, {.name = "alone n = 3", .max_seqs = 3, .prefix_caching = false, .n = 3}, 2);
            EXPECT_EQ(got, alone_n3);
        }
        if (sc.n_blocks < 100) {
            EXPECT_GT(stats.preemptions, 0);
        }
        if (sc.draft) {
            EXPECT_GT(stats.draft_tokens, 0);
        }
        if (sc.warm) {
            EXPECT_GT(stats.prefix_hit_tokens, 0);
        }
    }
    // What the fake model cannot do: a draft model (the same random model, drafting greedily, so
    // its drafts are sometimes the sampled token and sometimes not), and the host tier (a pool too
    // small to keep the first pass's prefixes: the second pass loads them back from host memory).
    auto draft = [&] { return std::shared_ptr<model::StepModel>(real(Scenario{.name = "draft"})); };
    const std::vector<Scenario> more = {
        {.name = "draft model", .draft_model = true},
        {.name = "draft model under preemption", .max_seqs = 16, .n_blocks = 40, .draft_model = true},
        {.name = "host tier, warm", .max_seqs = 8, .n_blocks = 64, .warm = true, .tier_host_bytes = 64u << 20},
    };
    for (const Scenario& sc : more) {
        SCOPED_TRACE(sc.name);
        EngineStats stats;
        const Outputs got = run(real, sc, 29, &stats, draft);
        ASSERT_EQ(got.size(), size_t(kRequests));
        for (const auto& [key, tokens] : got) ASSERT_EQ(tokens, alone.at(key)) << "request " << key.first;
        if (sc.draft_model) {
            EXPECT_GT(stats.accepted_draft_tokens, 0);
            EXPECT_LT(stats.accepted_draft_tokens, stats.draft_tokens);  // some refused
        }
        if (sc.n_blocks < 100 && !sc.warm) {
            EXPECT_GT(stats.preemptions, 0);
        }
        if (sc.tier_host_bytes) {
            EXPECT_GT(stats.tier_host_hit_blocks, 0);
        }
    }
}

}  // namespace
}  // namespace pagoda::engine
