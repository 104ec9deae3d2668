// The fusion pass on real graphs: which ops it forms for the llama graph, and that the fused graph
// computes bitwise the logits of the unfused one (prefill and decode) on the CPU backend for float and
// quantised weights — every fused op is defined to run the same arithmetic as its sequence.
#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "model/fusion.h"
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

// The backend's own rewrite (Backend::prepared_input_cols): on the CPU, whose packed int8 kernels
// read activations quantised once, every norm of a Q8_0 llama read only by matmuls (each layer's two,
// and the output norm of the logit rows, which the head reads; not the hidden rows' norm, which is a
// graph output) gets one output more, its prepared form, which exactly the matmuls reading the norm take as their
// second input; the reference keeps no prepared form, so its fused graph has none.
TEST(FusionPass, TheCpuNormsWriteThePreparedInputOfTheirInt8Matmuls) {
    if (best_supported_isa() == Isa::scalar) GTEST_SKIP() << "no AVX2: no panel kernel runs here";
    const std::string path = random_model_path("llama", "q8_0");
    auto file = gguf::File::open(path);
    const ModelConfig config = read_config(*file);
    auto prepared_norms = [&](backend::Backend& b) {
        const Graph g = fuse(find_arch_builder(config.arch)(*file, config, b).graph, b);
        int count = 0;
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            const Node& norm = g.nodes[i];
            const size_t outs = norm.kind == OpKind::rms_norm ? 1 : norm.kind == OpKind::add_rms_norm ? 2 : 0;
            if (outs == 0 || norm.out.size() == outs) continue;
            EXPECT_EQ(norm.out.size(), outs + 1) << "op " << i;
            const int h = norm.out[outs - 1], q = norm.out[outs];
            for (const Node& n : g.nodes) {
                const bool reads_h = std::find(n.in.begin(), n.in.end(), h) != n.in.end();
                const bool reads_q = std::find(n.in.begin(), n.in.end(), q) != n.in.end();
                EXPECT_EQ(reads_h, reads_q) << op_name(n.kind) << " reads one form of op " << i << "'s output";
                if (reads_h) { EXPECT_TRUE(multiplies_input(n.kind) && n.in.size() == 2 && n.in[0] == h && n.in[1] == q); }
            }
            ++count;
        }
        return count;
    };
    auto cpu = backend::make_backend("cpu", {.n_threads = 1});
    EXPECT_EQ(prepared_norms(*cpu), 2 * int(config.n_layers) + 1) << "each layer's attention and FFN norms, the head's";
    auto reference = backend::make_backend("reference");
    EXPECT_EQ(prepared_norms(*reference), 0);
}

}  // namespace
}  // namespace pagoda::model
