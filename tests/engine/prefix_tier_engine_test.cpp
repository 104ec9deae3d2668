// The prefix cache's second tier end to end on a real (random) model: a prompt whose blocks were
// evicted from a tiny pool is served again from the host store or the files — its greedy output
// equals a cold run's, the tier counts the hits and the engine computes only the prompt's tail.
// Files outlive the engine: a second engine over the same directory (a restart) loads them. Also
// both backends' block export/import round trip.
#include <filesystem>
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {
namespace fs = std::filesystem;

constexpr int32_t kBlock = 16;
constexpr int64_t kVocab = 300;
constexpr int64_t kPrompt = 100;  // 6 reusable blocks (96 tokens) + 4 computed
constexpr int64_t kMaxTokens = 8;

std::string random_model() {
    static const std::string path = [] {
        model::RandomModelSpec spec;
        spec.vocab_size = kVocab;
        spec.seed = 11;
        const std::string p = pagoda::test::temp_path("tier-random.gguf");
        model::write_random_model(spec, nullptr, p);
        return p;
    }();
    return path;
}

// A pool of 7 blocks: one 100-token request (+ 8 generated) fills it, so the next prompt evicts
// every cached block of the previous one.
std::unique_ptr<model::StepModel> open_small(const std::string& backend = "cpu") {
    return model::open_step_model(random_model(), {.backend = backend, .threads = 1, .kv = {.block_size = kBlock},
                                                   .tokens_wanted = 7 * kBlock, .max_step_tokens = 128});
}

struct Served {
    std::vector<int32_t> tokens;
    int64_t cached = 0;    // usage.cached_prompt_tokens
    int64_t computed = 0;  // prompt tokens this request made the engine compute
};

Served serve(EngineCore& core, const std::vector<int32_t>& prompt) {
    test::Driver driver(core);
    const int64_t before = core.stats().computed_prompt_tokens;
    const RequestId id = driver.add(test::greedy_request(prompt, kMaxTokens));
    driver.run();
    const auto& r = driver.results[id];
    EXPECT_TRUE(r.done);
    return {r.choices.at(0).tokens, r.usage.cached_prompt_tokens, core.stats().computed_prompt_tokens - before};
}

std::vector<int32_t> cold_output(const std::vector<int32_t>& prompt, const std::string& backend = "cpu") {
    auto model = open_small(backend);
    EngineCore core(*model, nullptr, {.prefix_caching = false});
    return serve(core, prompt).tokens;
}

EngineOptions tier_options(kv::PrefixTierOptions tier) {
    EngineOptions o;
    o.scheduler = {.max_batched_tokens = 128, .max_seqs = 4};
    o.prefix_tier = std::move(tier);
    return o;
}

const std::vector<int32_t> kA = test::make_prompt(kPrompt, 1, kVocab);
const std::vector<int32_t> kB = test::make_prompt(kPrompt, 2, kVocab);

TEST(PrefixTierEngine, HostTierServesAPromptEvictedFromThePool) {
    const auto cold = cold_output(kA);
    auto model = open_small();
    ASSERT_EQ(model->info().n_kv_blocks, 7);
    EngineCore core(*model, nullptr, tier_options({.host_bytes = 64u << 20}));
    const Served first = serve(core, kA);
    EXPECT_EQ(first.tokens, cold);
    EXPECT_EQ(first.computed, kPrompt);
    EXPECT_EQ(serve(core, kB).computed, kPrompt);  // evicts all six of A's cached blocks
    EXPECT_EQ(core.stats().tier_spilled_blocks, 6);
    EXPECT_EQ(core.blocks().cached_prefix_blocks(kA), 0);  // none of A is left in the pool

    const Served again = serve(core, kA);
    EXPECT_EQ(again.tokens, cold);  // the loaded KV is the KV that was computed
    EXPECT_EQ(again.cached, 96);
    EXPECT_EQ(again.computed, kPrompt - 96);  // only the tail was computed
    const EngineStats s = core.stats();
    EXPECT_EQ(s.tier_host_hit_blocks, 6);
    EXPECT_EQ(s.tier_file_hit_blocks, 0);
    EXPECT_EQ(s.tier_hit_tokens, 96);
    EXPECT_EQ(s.tier_hit_bytes, int64_t(6 * model->info().kv_bytes_per_block));
    EXPECT_LE(s.tier_host_bytes, s.tier_host_capacity_bytes);
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
}

TEST(PrefixTierEngine, WithoutATierTheEvictedPromptIsRecomputed) {
    auto model = open_small();
    EngineCore core(*model, nullptr, tier_options({}));
    serve(core, kA);
    serve(core, kB);
    EXPECT_EQ(serve(core, kA).computed, kPrompt);
    EXPECT_EQ(core.prefix_tier(), nullptr);
}

TEST(PrefixTierEngine, FileTierServesEvictedBlocksAndSurvivesARestart) {
    const std::string dir = pagoda::test::temp_path("tier-engine-files");
    fs::remove_all(dir);
    const auto cold_a = cold_output(kA);
    const auto cold_b = cold_output(kB);
    {
        auto model = open_small();
        EngineCore core(*model, nullptr, tier_options({.dir = dir, .dir_bytes = 64u << 20}));
        serve(core, kA);
        serve(core, kB);  // A's blocks go to files
        core.prefix_tier()->flush();
        EXPECT_EQ(core.stats().tier_file_written, 6);
        const Served again = serve(core, kA);  // from files (there is no host store)
        EXPECT_EQ(again.tokens, cold_a);
        EXPECT_EQ(again.computed, kPrompt - 96);
        EXPECT_EQ(core.stats().tier_file_hit_blocks, 6);
    }  // the engine goes: B's blocks, still cached in the pool, are written too
    auto model = open_small();  // a new engine: nothing in its pool
    EngineCore core(*model, nullptr, tier_options({.dir = dir, .dir_bytes = 64u << 20}));
    EXPECT_EQ(core.stats().tier_file_blocks, 12);
    const Served b = serve(core, kB);
    EXPECT_EQ(b.tokens, cold_b);
    EXPECT_EQ(b.cached, 96);
    EXPECT_EQ(b.computed, kPrompt - 96);
    const Served a = serve(core, kA);
    EXPECT_EQ(a.tokens, cold_a);
    EXPECT_EQ(a.computed, kPrompt - 96);
    EXPECT_EQ(core.stats().tier_file_hit_blocks, 12);
    EXPECT_EQ(core.stats().tier_file_rejected, 0);
}

// A directory written for one model serves nothing to another model with the same shapes.
TEST(PrefixTierEngine, FilesOfOtherWeightsAreNeverUsed) {
    const std::string dir = pagoda::test::temp_path("tier-engine-foreign");
    fs::remove_all(dir);
    {
        auto model = open_small();
        EngineCore core(*model, nullptr, tier_options({.dir = dir, .dir_bytes = 64u << 20}));
        serve(core, kA);
    }
    model::RandomModelSpec spec;  // the same shapes, other weights
    spec.vocab_size = kVocab;
    spec.seed = 12;
    const std::string other = pagoda::test::temp_path("tier-random-other.gguf");
    model::write_random_model(spec, nullptr, other);
    auto model = model::open_step_model(other, {.threads = 1, .kv = {.block_size = kBlock},
                                                .tokens_wanted = 7 * kBlock, .max_step_tokens = 128});
    ASSERT_NE(model->info().model_key, open_small()->info().model_key);
    EngineCore core(*model, nullptr, tier_options({.dir = dir, .dir_bytes = 64u << 20}));
    EXPECT_EQ(serve(core, kA).computed, kPrompt);
    EXPECT_EQ(core.stats().tier_file_hit_blocks, 0);
}

// The same file always has the same identity (a restart relies on it).
TEST(PrefixTierEngine, ModelKeyIsStable) {
    EXPECT_EQ(open_small()->info().model_key, open_small()->info().model_key);
    EXPECT_NE(open_small()->info().model_key, 0u);
}

// Export then import into another block reproduces the block on both backends.
TEST(PrefixTierEngine, BackendsExportAndImportBlocksExactly) {
    for (const std::string backend : {"cpu", "reference"}) {
        SCOPED_TRACE(backend);
        const auto cold = cold_output(kA, backend);
        auto model = open_small(backend);
        EngineCore core(*model, nullptr, tier_options({.host_bytes = 64u << 20}));
        serve(core, kA);
        serve(core, kB);
        const Served again = serve(core, kA);
        EXPECT_EQ(again.tokens, cold);
        EXPECT_EQ(again.computed, kPrompt - 96);
        std::vector<uint8_t> bytes(model->info().kv_bytes_per_block), back(bytes.size());
        model->export_kv_block(2, bytes);
        model->import_kv_block(5, bytes);
        model->export_kv_block(5, back);
        EXPECT_EQ(bytes, back);
        EXPECT_THROW(model->export_kv_block(7, bytes), Error);
        std::vector<uint8_t> short_span(bytes.size() - 1);
        EXPECT_THROW(model->import_kv_block(0, short_span), Error);
    }
}

TEST(PrefixTierEngine, RefusesATierWithoutThePrefixCache) {
    auto model = open_small();
    EngineOptions o = tier_options({.host_bytes = 1 << 20});
    o.prefix_caching = false;
    EXPECT_THROW(EngineCore(*model, nullptr, o), Error);
}

}  // namespace
}  // namespace pagoda::engine
