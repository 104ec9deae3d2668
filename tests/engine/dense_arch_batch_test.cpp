// Greedy decoding of the dense architectures beyond the llama family (gemma2, gemma3, gemma4, phi3, with
// sliding windows short enough that the generations cross them; mistral3 with its attention
// temperature stepping within the generations) yields the same tokens alone or in
// a batch, whatever the KV block size, token budget (chunked prefill) and pool size (preemption).
#include <gtest/gtest.h>
#include <set>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::engine {
namespace {

struct RunConfig {
    int64_t budget;
    int32_t max_seqs;
    int64_t pool_tokens;
    int32_t block_size;
};

std::vector<std::vector<int32_t>> generate(const std::string& path, const RunConfig& s,
                                           const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens) {
    auto step = model::open_step_model(path, {.threads = 1, .kv = {.block_size = s.block_size},
                                              .tokens_wanted = s.pool_tokens, .max_step_tokens = s.budget});
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = s.budget, .max_seqs = s.max_seqs}});
    test::Driver driver(core);
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(driver.add(test::greedy_request(p, max_tokens)));
    for (int i = 0; core.has_work() && i < 100000; ++i) {
        core.step();
        driver.collect();
    }
    EXPECT_EQ(core.blocks().num_used_blocks(), 0);
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(driver.results[id].choices[0].tokens);
    return out;
}

TEST(DenseArchBatch, GreedyTokensIndependentOfBlockSizeAndBatch) {
    const int64_t vocab = 300, max_tokens = 12;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 10; ++i) prompts.push_back(test::make_prompt(3 + (i * 7) % 17, i + 1, vocab));
    for (const std::string arch : {"gemma2", "gemma3", "gemma4", "gemma4_ple", "phi3", "mistral3"}) {
        model::RandomModelSpec spec;
        spec.arch = arch == "gemma4_ple" ? "gemma4" : arch; spec.vocab_size = vocab; spec.head_dim = 16; spec.sliding_window = 6; spec.seed = 40;
        if (spec.arch == "gemma3") spec.swa_period = 2;
        if (spec.arch == "mistral3") spec.original_context = 8;  // attention temperature steps at 8, 16, 24
        if (spec.arch == "gemma4") {  // sliding, full, sliding, full: the last two read the first two's KV
            spec.n_layers = 4; spec.swa_period = 2; spec.shared_kv_layers = 2; spec.v_equals_k = true;
            spec.full_head_dim = 32; spec.full_kv_heads = 1;  // per-layer shapes, padded in the paged KV
            if (arch == "gemma4_ple") spec.per_layer_embd = 32;  // the E2B/E4B's per-layer embeddings
        }
        const std::string path = pagoda::test::temp_path("batch_" + arch + ".gguf");
        model::write_random_model(spec, nullptr, path);
        std::vector<std::vector<int32_t>> alone;
        for (const auto& p : prompts) alone.push_back(generate(path, {512, 1, 1024, 16}, {p}, max_tokens)[0]);
        // Greedy decoding has clear winners: not every request repeats one token.
        std::set<int32_t> distinct;
        for (const auto& a : alone) distinct.insert(a.begin(), a.end());
        EXPECT_GT(distinct.size(), 10u) << arch;
        for (const RunConfig& s : {RunConfig{512, 16, 2048, 16}, RunConfig{5, 4, 1024, 4}, RunConfig{16, 10, 96, 2}, RunConfig{33, 8, 512, 1}}) {
            const auto got = generate(path, s, prompts, max_tokens);
            for (size_t i = 0; i < prompts.size(); ++i)
                ASSERT_EQ(got[i], alone[i]) << arch << " block " << s.block_size << " budget " << s.budget << " request " << i;
        }
    }
}

}  // namespace
}  // namespace pagoda::engine
