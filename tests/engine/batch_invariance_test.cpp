// Batch invariance end to end on real models: a greedy request yields the same tokens alone or
// beside up to 64 others, whatever the token budget (chunked prefill), arrival order and KV pool
// size (preemption and recomputation). Plus the stories260K goldens (llama2.c run.c) through the
// engine, all at once, in small chunks.
#include <filesystem>
#include <optional>
#include <gtest/gtest.h>

#include "backend/cpu/amx_test_util.h"
#include "backend/cpu/attention/attention.h"
#include "backend/cpu/matmul_test_util.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "model/golden_file.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;

std::string random_model() {
    static const std::string path = [] {
        model::RandomModelSpec spec;  // 2 layers, dim 64, 4 heads, 2 KV heads
        spec.vocab_size = 300;
        spec.seed = 7;
        const std::string p = pagoda::test::temp_path("engine-random.gguf");
        model::write_random_model(spec, nullptr, p);
        return p;
    }();
    return path;
}

struct Scenario {
    int64_t budget;
    int32_t max_seqs;
    int64_t pool_tokens;
    int32_t block_size;
    std::optional<kv::KvDtype> kv_dtype = std::nullopt;  // empty: the model's natural type
};

// Runs `prompts` through one engine; request i arrives after `arrive_after[i]` steps.
std::unique_ptr<model::StepModel> open(const std::string& path, const Scenario& sc) {
    return model::open_step_model(path, {.threads = 1, .kv = {.block_size = sc.block_size, .dtype = sc.kv_dtype},
                                         .tokens_wanted = sc.pool_tokens, .max_step_tokens = sc.budget});
}

std::vector<std::vector<int32_t>> run_batch(const std::string& m, const Scenario& sc,
                                            const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                                            const std::vector<int>& arrive_after, int64_t* preemptions = nullptr) {
    auto step = open(m, sc);
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = sc.budget, .max_seqs = sc.max_seqs}});
    Driver driver(core);
    std::vector<RequestId> ids(prompts.size());
    size_t next = 0;
    std::vector<size_t> order(prompts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return arrive_after[a] < arrive_after[b]; });
    for (int s = 0; next < order.size() || core.has_work(); ++s) {
        while (next < order.size() && arrive_after[order[next]] <= s) {
            ids[order[next]] = driver.add(test::greedy_request(prompts[order[next]], max_tokens));
            ++next;
        }
        core.step();
        driver.collect();
        if (s > 100000) break;
    }
    if (preemptions) *preemptions = core.stats().preemptions;
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(driver.results[id].choices[0].tokens);
    return out;
}

TEST(BatchInvariance, RandomModelAloneVersusBatched) {
    auto m = random_model();
    const int64_t vocab = 300;  // random_model()'s vocabulary
    const int64_t max_tokens = 8;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 64; ++i) prompts.push_back(test::make_prompt(1 + (i * 13) % 29, i + 1, vocab));
    // Every third prompt shares a long prefix with the previous one (prefix-cache hits mid-batch).
    for (size_t i = 2; i < prompts.size(); i += 3) {
        auto p = prompts[i - 1];
        p.push_back(int32_t(i % vocab));
        prompts[i] = p;
    }
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts)
        alone.push_back(run_batch(m, {512, 1, 4096, 16}, {p}, max_tokens, {0})[0]);

    const std::vector<Scenario> scenarios = {
        {512, 64, 8192, 16},  // everything at once
        {7, 4, 4096, 4},      // tiny budget: chunked prefill beside decodes
        {16, 16, 112, 4},     // tiny pool: preemption
        {33, 8, 256, 1},      // block size 1
    };
    for (size_t si = 0; si < scenarios.size(); ++si) {
        for (size_t n : {1u, 7u, 64u}) {
            std::vector<std::vector<int32_t>> sub(prompts.begin(), prompts.begin() + std::ptrdiff_t(n));
            std::vector<int> arrive(n);
            for (size_t i = 0; i < n; ++i) arrive[i] = int((i * 7 + si) % 11);  // staggered, out of order
            int64_t preemptions = 0;
            auto got = run_batch(m, scenarios[si], sub, max_tokens, arrive, &preemptions);
            for (size_t i = 0; i < n; ++i)
                ASSERT_EQ(got[i], alone[i]) << "scenario " << si << ", batch of " << n << ", request " << i;
            if (si == 2 && n == 64) {
                EXPECT_GT(preemptions, 0);
            }
        }
    }
}

std::string random_f16_model() {
    static const std::string path = [] {
        model::RandomModelSpec spec;
        spec.vocab_size = 300;
        spec.seed = 8;
        spec.type = gguf::GgmlType::F16;
        const std::string p = pagoda::test::temp_path("engine-random-f16.gguf");
        model::write_random_model(spec, nullptr, p);
        return p;
    }();
    return path;
}

// F16 weights on the AMX bf16 tiles (amx_bf16, emulated on hosts without AMX): every request's
// greedy tokens are the same alone or batched, chunked, and under preemption — the tiles are used at
// every token count, decode included, and each output depends on its own token only.
TEST(BatchInvariance, RandomF16ModelOnAmxBf16TilesAloneVersusBatched) {
    if (active_isa() != Isa::avx512) GTEST_SKIP() << "the AMX bf16 kernel needs the avx512 path (PAGODA_ISA or the CPU chose another)";
    backend::cpu::testing::AmxGuard amx;
    backend::cpu::testing::KernelConfigGuard config;
    set_amx_enabled(true);
    if (!amx_bf16_hardware_available()) backend::cpu::set_amx_emulation(true);
    backend::cpu::set_float_method(backend::cpu::FloatMethod::amx_bf16);
    const std::string m = random_f16_model();
    const int64_t vocab = 300, max_tokens = 6;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 12; ++i) prompts.push_back(test::make_prompt(1 + (i * 13) % 29, i + 1, vocab));
    const uint64_t before = backend::cpu::amx_bf16_dispatch_count();
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(run_batch(m, {512, 1, 4096, 16}, {p}, max_tokens, {0})[0]);
    EXPECT_GT(backend::cpu::amx_bf16_dispatch_count(), before) << "the AMX bf16 tiles were not used";
    const std::vector<Scenario> scenarios = {{512, 12, 4096, 16}, {7, 4, 4096, 4}, {16, 12, 96, 4}};
    for (size_t si = 0; si < scenarios.size(); ++si) {
        std::vector<int> arrive(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) arrive[i] = int((i * 7 + si) % 5);
        const auto got = run_batch(m, scenarios[si], prompts, max_tokens, arrive);
        for (size_t i = 0; i < prompts.size(); ++i) ASSERT_EQ(got[i], alone[i]) << "scenario " << si << ", request " << i;
    }
}

// Attention on the AMX bf16 tiles (the amx_bf16 attention method, emulated on hosts without AMX)
// over the F16 model's f16 cache: the same alone or batched, chunked and under preemption, at
// block sizes 16, 4 and 1 — decode tokens and prefill chunks take the same walk per query row.
TEST(BatchInvariance, RandomF16ModelWithAmxAttentionAloneVersusBatched) {
    if (active_isa() != Isa::avx512) GTEST_SKIP() << "the AMX attention method needs the avx512 path (PAGODA_ISA or the CPU chose another)";
    backend::cpu::testing::AmxGuard amx;
    struct MethodGuard {
        std::optional<backend::cpu::AttentionMethod> saved = backend::cpu::installed_attention_method();
        ~MethodGuard() { backend::cpu::set_attention_method(saved); }
    } method_guard;
    set_amx_enabled(true);
    if (!amx_bf16_hardware_available()) backend::cpu::set_amx_emulation(true);
    backend::cpu::set_attention_method(backend::cpu::AttentionMethod::amx_bf16);
    const std::string m = random_f16_model();
    const int64_t vocab = 300, max_tokens = 6;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 12; ++i) prompts.push_back(test::make_prompt(1 + (i * 17) % 41, i + 3, vocab));
    const uint64_t before = backend::cpu::amx_attention_dispatch_count();
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(run_batch(m, {512, 1, 4096, 16}, {p}, max_tokens, {0})[0]);
    EXPECT_GT(backend::cpu::amx_attention_dispatch_count(), before) << "the AMX attention method was not used";
    const std::vector<Scenario> scenarios = {{512, 12, 4096, 16}, {7, 4, 4096, 4}, {16, 12, 96, 4}, {33, 8, 512, 1}};
    for (size_t si = 0; si < scenarios.size(); ++si) {
        std::vector<int> arrive(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) arrive[i] = int((i * 7 + si) % 5);
        const auto got = run_batch(m, scenarios[si], prompts, max_tokens, arrive);
        for (size_t i = 0; i < prompts.size(); ++i) ASSERT_EQ(got[i], alone[i]) << "scenario " << si << ", request " << i;
    }
}

// The same with an int8 (q8) KV cache: every request's greedy tokens are the same alone or
// batched, at block sizes 16, 4 and 1, chunked, and under preemption. (q8 changes the numbers, so
// the reference is q8 alone, not f16.)
TEST(BatchInvariance, RandomModelQ8CacheAloneVersusBatched) {
    auto m = random_model();
    const int64_t vocab = 300;
    const int64_t max_tokens = 8;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 24; ++i) prompts.push_back(test::make_prompt(1 + (i * 13) % 29, i + 101, vocab));
    for (size_t i = 2; i < prompts.size(); i += 3) {
        auto p = prompts[i - 1];
        p.push_back(int32_t(i % vocab));
        prompts[i] = p;
    }
    const auto q8 = kv::KvDtype::q8;
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(run_batch(m, {512, 1, 4096, 16, q8}, {p}, max_tokens, {0})[0]);
    const std::vector<Scenario> scenarios = {
        {512, 24, 8192, 16, q8},  // everything at once
        {7, 4, 4096, 4, q8},      // tiny budget: chunked prefill beside decodes, block size 4
        {16, 16, 112, 4, q8},     // tiny pool: preemption
        {33, 8, 256, 1, q8},      // block size 1
    };
    bool differs_from_f16 = false;
    for (size_t si = 0; si < scenarios.size(); ++si) {
        std::vector<int> arrive(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) arrive[i] = int((i * 7 + si) % 11);
        int64_t preemptions = 0;
        auto got = run_batch(m, scenarios[si], prompts, max_tokens, arrive, &preemptions);
        for (size_t i = 0; i < prompts.size(); ++i)
            ASSERT_EQ(got[i], alone[i]) << "q8 scenario " << si << ", request " << i;
        if (si == 2) {
            EXPECT_GT(preemptions, 0);
        }
    }
    // The q8 cache is really in use: some request's tokens differ from the f16 cache's.
    for (size_t i = 0; i < prompts.size() && !differs_from_f16; ++i)
        differs_from_f16 = run_batch(m, {512, 1, 4096, 16, kv::KvDtype::f16}, {prompts[i]}, max_tokens, {0})[0] != alone[i];
    EXPECT_TRUE(differs_from_f16);
}

using Golden = pagoda::test::GoldenIds;


TEST(BatchInvariance, Stories260KGoldensTogetherInSmallChunks) {
    const std::string model_path = pagoda::test::fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model_path);
    std::vector<Golden> goldens;
    for (const auto& e : std::filesystem::directory_iterator(pagoda::test::fixture("models/golden")))
        if (e.path().string().ends_with(".ids.txt")) goldens.push_back(pagoda::test::read_golden_ids(e.path().string()));
    ASSERT_GE(goldens.size(), 3u);
    for (const Scenario& sc : {Scenario{4096, 8, 4096, 16}, Scenario{5, 4, 640, 4}}) {
        auto step = open(model_path, sc);
        EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = sc.budget, .max_seqs = sc.max_seqs}});
        Driver driver(core);
        std::vector<RequestId> ids;
        for (const auto& g : goldens) {
            ASSERT_GT(g.tokens.size(), g.prompt.size());
            ASSERT_TRUE(std::equal(g.prompt.begin(), g.prompt.end(), g.tokens.begin()));
            ids.push_back(driver.add(test::greedy_request(g.prompt, int64_t(g.tokens.size() - g.prompt.size()))));
        }
        driver.run();
        for (size_t i = 0; i < goldens.size(); ++i) {
            std::vector<int32_t> want(goldens[i].tokens.begin() + std::ptrdiff_t(goldens[i].prompt.size()),
                                      goldens[i].tokens.end());
            EXPECT_EQ(driver.results[ids[i]].choices[0].tokens, want) << "golden " << i << " budget " << sc.budget;
        }
    }
}

}  // namespace
}  // namespace pagoda::engine
