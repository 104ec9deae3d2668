// Batch invariance of mixture-of-experts models through the engine: a greedy request yields the
// same tokens alone or beside others (so its experts' GEMMs share rows with other tokens), whatever
// the token budget (chunked prefill), arrival order and KV block size; for a Mixtral-style llama with
// Q4_0 experts, a qwen2moe with F32 ones, a qwen3moe with Q8_0 ones, and gpt-oss (sinks, sliding
// layers, biased experts) with F32 and MXFP4 ones, and deepseek2 (MLA, a dense first layer, sigmoid
// groups, shared experts, Mistral-Large-3's attention temperature) and glm4moe (partial NEOX RoPE, Q/K norms, sigmoid with a correction bias,
// shared experts, a NextN block not run) and minimax-m2 (whole-row Q/K norms, partial NEOX RoPE,
// sigmoid with a selection bias) with F32 and Q8_0 ones.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "quant/quantize_model.h"

namespace pagoda::engine {
namespace {

using test::Driver;

std::string moe_model(const std::string& arch, const std::string& quant) {
    model::RandomModelSpec spec;
    spec.arch = arch;
    spec.dim = 64; spec.ffn_dim = 64; spec.vocab_size = 300; spec.seed = 9;
    spec.n_experts = 8; spec.n_experts_used = 2; spec.expert_ffn_dim = 64;
    spec.shared_expert_ffn_dim = arch == "qwen2moe" ? 32 : 0;  // gpt-oss refuses one
    if (arch == "deepseek2") {  // V3's form: MLA with a q bottleneck, a dense first layer, sigmoid groups
        spec.head_dim = 24; spec.mla_rope_dims = 8; spec.v_head_dim = 16; spec.kv_lora_rank = 32; spec.q_lora_rank = 32;
        spec.expert_gating = 2; spec.expert_groups = 4; spec.expert_groups_used = 2; spec.expert_weights_norm = true;
        spec.expert_weights_scale = 2.5f; spec.yarn = true;
    }
    if (arch == "glm4moe") {  // GLM-4.5's form: Q/K norms, a dense first layer, sigmoid + correction bias
        spec.head_dim = 32; spec.qk_norm = true; spec.expert_weights_norm = true; spec.expert_weights_scale = 2.5f;
        spec.nextn_layers = 1;
    }
    if (arch == "minimax-m2") spec.head_dim = 32;
    if (arch == "deepseek2") {  // Mistral-Large-3's attention temperature, steps at positions 8, 16, 24
        spec.attn_temperature_scale = 0.1f;
        spec.attn_temperature_length = 8;
    }
    const std::string f = pagoda::test::temp_path("engine-moe-" + arch + ".gguf");
    model::write_random_model(spec, nullptr, f);
    if (quant.empty()) return f;
    const std::string q = pagoda::test::temp_path("engine-moe-" + arch + "-" + quant + ".gguf");
    quant::QuantizeRequest req;
    req.input = f;
    req.output = q;
    req.target = quant;
    ThreadPool pool(2);
    quant::quantize_model(req, pool);
    return q;
}

struct Scenario {
    int64_t budget;
    int32_t max_seqs;
    int32_t block_size;
};

std::vector<std::vector<int32_t>> run_batch(const std::string& path, const Scenario& sc,
                                            const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens) {
    auto step = model::open_step_model(path, {.threads = 2, .kv = {.block_size = sc.block_size}, .tokens_wanted = 4096,
                                              .max_step_tokens = sc.budget});
    EngineCore core(*step, nullptr, {.scheduler = {.max_batched_tokens = sc.budget, .max_seqs = sc.max_seqs}});
    Driver driver(core);
    std::vector<RequestId> ids;
    for (size_t i = 0; i < prompts.size(); ++i) {
        ids.push_back(driver.add(test::greedy_request(prompts[i], max_tokens)));
        if (i % 3 == 2) {  // later arrivals join mid-flight
            core.step();
            driver.collect();
        }
    }
    driver.run();
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) out.push_back(driver.results[id].choices[0].tokens);
    return out;
}

class MoeBatchInvariance : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(MoeBatchInvariance, GreedyTokensDoNotDependOnTheBatchOrBlockSize) {
    const auto& [arch, quant] = GetParam();
    const std::string path = moe_model(arch, quant);
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 12; ++i) prompts.push_back(test::make_prompt(1 + (i * 13) % 23, i + 1, 300));
    std::vector<std::vector<int32_t>> alone;
    for (const auto& p : prompts) alone.push_back(run_batch(path, {512, 1, 16}, {p}, 8)[0]);
    for (const Scenario& sc : {Scenario{512, 12, 16}, Scenario{7, 4, 4}, Scenario{33, 8, 1}}) {
        const auto got = run_batch(path, sc, prompts, 8);
        for (size_t i = 0; i < prompts.size(); ++i)
            ASSERT_EQ(got[i], alone[i]) << "budget " << sc.budget << " block size " << sc.block_size << " request " << i;
    }
    // The greedy outputs are not degenerate: the requests do not all generate the same tokens.
    size_t distinct = 0;
    for (size_t i = 1; i < alone.size(); ++i) distinct += alone[i] != alone[0];
    EXPECT_GT(distinct, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, MoeBatchInvariance,
                         ::testing::Values(std::pair<std::string, std::string>{"llama", "q4_0"},
                                           std::pair<std::string, std::string>{"qwen2moe", ""},
                                           std::pair<std::string, std::string>{"qwen3moe", "q8_0"},
                                           std::pair<std::string, std::string>{"gpt-oss", ""},
                                           std::pair<std::string, std::string>{"gpt-oss", "mxfp4"},
                                           std::pair<std::string, std::string>{"deepseek2", ""},
                                           std::pair<std::string, std::string>{"deepseek2", "q8_0"},
                                           std::pair<std::string, std::string>{"glm4moe", ""},
                                           std::pair<std::string, std::string>{"glm4moe", "q8_0"},
                                           std::pair<std::string, std::string>{"minimax-m2", ""},
                                           std::pair<std::string, std::string>{"minimax-m2", "q8_0"}),
                         [](const auto& info) {
                             std::string name = info.param.first + (info.param.second.empty() ? "" : "_" + info.param.second);
                             for (char& c : name) c = c == '-' ? '_' : c;  // gtest names take no '-'
                             return name;
                         });

}  // namespace
}  // namespace pagoda::engine
