// The fusion pass on real graphs: which ops it forms for the llama graph, and that the fused graph
// computes bitwise the logits of the unfused one (prefill and decode) on the CPU backend for float and
// quantised weights — every fused op is defined to run the same arithmetic as its sequence.
#include <cstring>
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

std::string random_model_path(const std::string& arch, const std::string& type) {
    RandomModelSpec spec;
    spec.n_layers = 2; spec.dim = 256; spec.n_heads = 4; spec.n_kv_heads = 2; spec.ffn_dim = 512; spec.vocab_size = 300;
    spec.arch = arch;
    spec.seed = 11;
    const std::string f32 = test::temp_path("fusion_" + arch + "_f32.gguf");
    write_random_model(spec, nullptr, f32);
    if (type == "f32") return f32;
    const std::string out = test::temp_path("fusion_" + arch + "_" + type + ".gguf");
    quant::QuantizeRequest req;
    req.input = f32;
    req.output = out;
    req.target = type;
    req.plain = true;
    ThreadPool pool(2);
    quant::quantize_model(req, pool);
    return out;
}

std::vector<float> logits_of(const std::string& path, bool fusion) {
    auto model = open_step_model(path, {.threads = 2, .kv = {.block_size = 4}, .tokens_wanted = 64, .fusion = fusion});
    SequenceRunner runner(*model, false);
    std::vector<int32_t> ids;
    for (int i = 0; i < 21; ++i) ids.push_back((i * 53 + 7) % 300);
    auto logits = runner.prefill(0, ids, 64, true);
    for (int32_t t : {5, 9, 200}) {
        auto row = runner.decode(0, t);
        logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
}

class FusedGraph : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(FusedGraph, GivesBitwiseTheLogitsOfTheUnfusedGraph) {
    const auto& [arch, type] = GetParam();
    const std::string path = random_model_path(arch, type);
    const auto fused = logits_of(path, true), plain = logits_of(path, false);
    ASSERT_EQ(fused.size(), plain.size());
    size_t differ = 0;
    for (size_t i = 0; i < fused.size(); ++i) differ += std::memcmp(&fused[i], &plain[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << arch << " " << type;
}

INSTANTIATE_TEST_SUITE_P(Types, FusedGraph,
                         ::testing::Values(std::pair{"llama", "f32"}, std::pair{"qwen2", "f32"}, std::pair{"llama", "q8_0"},
                                           std::pair{"qwen2", "q4_0"}, std::pair{"llama", "q4_k_m"},
                                           std::pair{"llama", "q6_k"}, std::pair{"qwen3", "f32"},
                                           std::pair{"qwen3", "q8_0"}),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

// The llama graph of a 2-layer model: as built the embedding, 13 ops a layer (12 in the first: no
// residual add before its norm) and 4 at the end; fused, per layer a norm (with the add after the
// first), one QKV op, attention, output matmul, add+norm, gate|up op and down matmul.
TEST(FusionPass, FormsTheFusedOpsOfTheLlamaGraph) {
    const std::string path = random_model_path("llama", "f32");
    auto model = open_step_model(path, {.threads = 1, .tokens_wanted = 16});
    EXPECT_EQ(model->op_counts(),
              "add 1, add_rms_norm 3, attention 2, embed 1, gather_hidden_rows 1, gather_logit_rows 1, matmul 5, "
              "matmul_silu_mul 2, qkv_rope_kv_write 2, rms_norm 3");
    auto unfused = open_step_model(path, {.threads = 1, .tokens_wanted = 16, .fusion = false});
    EXPECT_EQ(unfused->op_counts(),
              "add 4, attention 2, embed 1, gather_hidden_rows 1, gather_logit_rows 1, kv_write 2, matmul 9, rms_norm 6, rope 4, "
              "silu_mul 2");
}

}  // namespace
}  // namespace pagoda::model
