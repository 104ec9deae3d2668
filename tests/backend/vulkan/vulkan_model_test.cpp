// The Vulkan backend end to end on random-weight models against the reference backend (the oracle):
// each architecture at F32 (the mixtures of experts too: llama/Mixtral, qwen2moe, qwen3moe, gpt-oss,
// deepseek2; the qwen35 / qwen35moe / qwen3next hybrids), llama also at F16, Q8_0, Q4_0 and IQ4_XS and gpt-oss
// with MXFP4 experts (through `pagoda quantize`'s driver),
// prompt as one batch and then token by token; and batch invariance: a sequence's logits (so its
// greedy tokens) are bitwise the same alone as inside a batch of three, across the GEMV / GEMM switch
// (5 prompt tokens alone: GEMV; 28 in the batch: GEMM). All on lavapipe under the validation layer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "core/thread_pool.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "quant/quantize_model.h"

namespace pagoda::model {
namespace {

struct VulkanCase {
    std::string name;
    RandomModelSpec spec;
    std::string quantize;  // a `pagoda quantize` target ("" = none)
    double tolerance;      // max |vulkan - reference| relative to the largest |reference logit|
    std::vector<gguf::GgmlType> holds = {};  // weight types the quantised file must contain
};
void PrintTo(const VulkanCase& c, std::ostream* os) { *os << c.name; }

RandomModelSpec small_spec() {
    RandomModelSpec s;
    s.n_layers = 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300;
    return s;
}

// Tolerances: f32 sums in another order than the reference's doubles (1e-5 of the largest logit,
// as the CPU backend's f32 path); the weights are the file's values exactly (F16 widened, block
// types dequantised by their formula), and activations are never rounded to fewer bits.
std::vector<VulkanCase> cases() {
    std::vector<VulkanCase> out;
    out.push_back({"llama_f32", small_spec(), "", 1e-5});
    {
        VulkanCase c{"llama_f16_tied", small_spec(), "", 1e-5};
        c.spec.type = gguf::GgmlType::F16; c.spec.tied_output = true; c.spec.seed = 2;
        out.push_back(c);
    }
    {
        VulkanCase c{"llama_q8_0", small_spec(), "q8_0", 1e-5};
        c.spec.seed = 3;
        out.push_back(c);
    }
    {
        VulkanCase c{"llama_q4_0", small_spec(), "q4_0", 1e-5};
        c.spec.seed = 4;
        out.push_back(c);
    }
    for (const char* arch : {"qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
        VulkanCase c{std::string(arch) + "_f32", small_spec(), "", 1e-5};
        c.spec.arch = arch; c.spec.seed = 5; c.spec.rope_theta = 1e6f;
        if (c.spec.arch == "qwen3") c.spec.head_dim = 16;
        if (c.spec.arch == "gemma2" || c.spec.arch == "gemma3") c.spec.swa_period = 2, c.spec.sliding_window = 6;
        if (c.spec.arch == "phi3") c.spec.sliding_window = 6;
        out.push_back(c);
    }
    // Mixtures of experts (routed on the host, experts on the device): Mixtral's form (llama with
    // experts), qwen2moe (a gated shared expert), qwen3moe, gpt-oss (attention sinks, biased experts,
    // the clamped SwiGLU, softmax over the selected experts), deepseek2 (MLA's copy_columns, sigmoid
    // routing with a correction bias, groups and a routed scale, shared experts).
    for (const char* arch : {"llama", "qwen2moe", "qwen3moe", "gpt-oss", "deepseek2"}) {
        VulkanCase c{(arch == std::string("gpt-oss") ? std::string("gpt_oss") : std::string(arch)) + "_moe_f32", small_spec(), "", 1e-5};
        c.spec.arch = arch; c.spec.seed = 6; c.spec.n_experts = 4; c.spec.expert_ffn_dim = 32;
        if (c.spec.arch == "qwen3moe" || c.spec.arch == "gpt-oss") c.spec.head_dim = 16;
        if (c.spec.arch == "deepseek2") {
            RandomModelSpec& s = c.spec;
            s.n_layers = 3; s.head_dim = 24; s.mla_rope_dims = 8; s.v_head_dim = 16; s.kv_lora_rank = 32; s.q_lora_rank = 32;
            s.n_experts = 8; s.n_shared_experts = 1; s.leading_dense = 1; s.expert_gating = 2; s.expert_groups = 4;
            s.expert_groups_used = 2; s.expert_weights_scale = 2.5f; s.expert_weights_norm = true; s.yarn = true;
        }
        out.push_back(c);
    }
    // gemma4 (per-layer head sizes compacted by copy_columns, the last layers sharing KV) and its
    // E2B/E4B form (per-layer embeddings, one FFN width per layer), in F32 and from a Q8_0 file.
    for (const char* form : {"gemma4_f32", "gemma4_ple_f32", "gemma4_ple_q8_0"}) {
        const std::string name = form;
        VulkanCase c{name, small_spec(), name.ends_with("q8_0") ? "q8_0" : "", 1e-5};
        c.spec.arch = "gemma4"; c.spec.seed = 11; c.spec.n_layers = 4; c.spec.swa_period = 2; c.spec.sliding_window = 6;
        c.spec.head_dim = 16; c.spec.full_head_dim = 32; c.spec.full_kv_heads = 1;
        c.spec.shared_kv_layers = 2; c.spec.v_equals_k = true;
        if (name.find("ple") != std::string::npos) c.spec.per_layer_embd = 32;
        out.push_back(c);
    }
    // The hybrids (gated DeltaNet layers: causal_conv1d, gated_delta_rule, the state slots in the
    // arena; every 4th layer gated full attention: sigmoid_mul), dense and with experts; qwen3next's
    // fused projections regrouped at load and its grouped value heads (q, k repeated by copy_columns).
    for (const char* arch : {"qwen35", "qwen35moe", "qwen3next"}) {
        VulkanCase c{std::string(arch) + "_f32", small_spec(), "", 1e-5};
        c.spec.arch = arch; c.spec.seed = 8; c.spec.n_layers = 4; c.spec.head_dim = 16;
        if (c.spec.arch != "qwen35") c.spec.n_experts = 4, c.spec.expert_ffn_dim = 32;
        c.spec.fused_qkvz = c.spec.arch == "qwen3next";
        out.push_back(c);
    }
    {
        VulkanCase c{"qwen3moe_moe_q8_0", small_spec(), "q8_0", 1e-5};
        c.spec.arch = "qwen3moe"; c.spec.seed = 7; c.spec.n_experts = 4; c.spec.expert_ffn_dim = 32; c.spec.head_dim = 16;
        out.push_back(c);
    }
    // The codebook types: IQ4_XS (rows of 256; llama-quantize's IQ4_NL for the others) and
    // gpt-oss's MXFP4 experts (llama.cpp's MXFP4_MOE).
    {
        VulkanCase c{"llama_iq4_xs", small_spec(), "iq4_xs", 1e-5, {gguf::GgmlType::IQ4_XS}};
        c.spec.dim = 256; c.spec.ffn_dim = 256; c.spec.seed = 8;
        out.push_back(c);
    }
    {
        VulkanCase c{"gpt_oss_moe_mxfp4", small_spec(), "mxfp4", 1e-5, {gguf::GgmlType::MXFP4}};
        c.spec.arch = "gpt-oss"; c.spec.seed = 9; c.spec.n_experts = 4; c.spec.expert_ffn_dim = 32; c.spec.head_dim = 16;
        out.push_back(c);
    }
    return out;
}

std::string write_model(const VulkanCase& c) {
    const std::string path = test::temp_path("vulkan_" + c.name + ".gguf");
    write_random_model(c.spec, nullptr, path);
    if (!c.quantize.empty()) {
        ThreadPool pool(2);
        quant::quantize_model({.input = path, .output = path + ".q", .target = c.quantize}, pool);
        std::filesystem::rename(path + ".q", path);
    }
    return path;
}

class VulkanModel : public ::testing::TestWithParam<VulkanCase> {
protected:
    void SetUp() override { PAGODA_REQUIRE_VULKAN(); }
};

TEST_P(VulkanModel, ForwardMatchesReference) {
    const VulkanCase& c = GetParam();
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(write_model(c)));
    for (gguf::GgmlType type : c.holds)
        ASSERT_TRUE(std::any_of(file->tensors().begin(), file->tensors().end(), [&](const auto& t) { return t.type == type; }))
            << c.name << " holds no " << gguf::type_name(uint32_t(type)) << " weight";
    const StepModelOptions options{.kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 64};
    StepModelOptions vulkan = options, reference = options;
    vulkan.backend = "vulkan";
    reference.backend = "reference";
    auto model = open_step_model(file, vulkan);
    const int64_t vocab = model->info().vocab_size;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 19; ++i) tokens.push_back((i * 37 + 11) % int32_t(vocab));
    std::vector<float> expected;
    {
        auto ref = open_step_model(file, reference);
        SequenceRunner runner(*ref, false);
        expected = runner.prefill(0, tokens, 64, true);
    }
    auto check = [&](const float* row, size_t pos, const char* how) {
        double scale = 0;
        for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, std::abs(double(expected[pos * vocab + i])));
        for (int64_t i = 0; i < vocab; ++i)
            ASSERT_NEAR(row[i], expected[pos * vocab + i], c.tolerance * scale) << how << ", position " << pos << " logit " << i;
    };
    SequenceRunner runner(*model, false);
    const std::vector<float> batch = runner.prefill(0, tokens, 64, true);
    ASSERT_EQ(batch.size(), expected.size());
    for (size_t p = 0; p < tokens.size(); ++p) check(batch.data() + p * vocab, p, "one batch");
    std::vector<float> row = runner.prefill(1, std::span<const int32_t>(tokens.data(), 7));
    check(row.data(), 6, "prefix chunk");
    for (size_t p = 7; p < tokens.size(); ++p) {
        row = runner.decode(1, tokens[p]);
        check(row.data(), p, "token by token");
    }
}

INSTANTIATE_TEST_SUITE_P(Architectures, VulkanModel, ::testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

// Sequences of a hand-made batch: each owns blocks [first, first + 4) of 16-token blocks.
struct Seq {
    std::vector<int32_t> tokens;  // prompt, then generated
    std::vector<int32_t> table;
    int32_t computed = 0;
};

// One step over `seqs`: every token not yet computed, logits for each sequence's last token.
std::vector<float> step(StepModel& model, std::vector<Seq*> seqs) {
    Batch b;
    for (Seq* s : seqs) {
        const int32_t index = b.add_sequence(s->table);
        for (int32_t p = s->computed; p < int32_t(s->tokens.size()); ++p)
            b.add(s->tokens[size_t(p)], p, index, int64_t(s->table[size_t(p / 16)]) * 16 + p % 16, p + 1 == int32_t(s->tokens.size()));
        s->computed = int32_t(s->tokens.size());
    }
    return model.forward(b);
}

int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

// A sequence's logits alone and in a batch of three, bitwise, over `generate` greedy steps.
void expect_batch_invariant(const VulkanCase& c);

TEST(VulkanBatchInvariance, GreedyTokensAloneEqualInABatch) {
    PAGODA_REQUIRE_VULKAN();
    VulkanCase c{"llama_q8_0_invariance", small_spec(), "q8_0", 0};
    c.spec.seed = 9;
    expect_batch_invariant(c);
}

// The mixture of experts: an expert's tokens are one GEMM in the batch and a GEMV alone; the
// routes, the gathered rows and the per-token combine depend on the token alone.
TEST(VulkanBatchInvariance, MixtureOfExpertsAloneEqualInABatch) {
    PAGODA_REQUIRE_VULKAN();
    VulkanCase c{"qwen3moe_invariance", small_spec(), "", 0};
    c.spec.arch = "qwen3moe"; c.spec.seed = 10; c.spec.n_experts = 4; c.spec.expert_ffn_dim = 32; c.spec.head_dim = 16;
    expect_batch_invariant(c);
}

void expect_batch_invariant(const VulkanCase& c) {
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(write_model(c)));
    for (gguf::GgmlType type : c.holds)
        ASSERT_TRUE(std::any_of(file->tensors().begin(), file->tensors().end(), [&](const auto& t) { return t.type == type; }))
            << c.name << " holds no " << gguf::type_name(uint32_t(type)) << " weight";
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = 16, .dtype = kv::KvDtype::f16}, .tokens_wanted = 512});
    const int64_t vocab = model->info().vocab_size;
    const int generate = 12;

    Seq alone{{5, 17, 42, 7, 99}, {0, 1, 2, 3}};
    std::vector<std::vector<float>> alone_logits;
    for (int i = 0; i < generate; ++i) {
        alone_logits.push_back(step(*model, {&alone}));
        alone.tokens.push_back(argmax(alone_logits.back().data(), vocab));
    }

    Seq a{{5, 17, 42, 7, 99}, {4, 5, 6, 7}}, b{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {8, 9, 10, 11}},
        d{{200, 100, 50, 25, 12, 6, 3, 1, 2, 4}, {12, 13, 14, 15}};
    for (int i = 0; i < generate; ++i) {
        const std::vector<float> logits = step(*model, {&b, &a, &d});  // a's rows sit between the others'
        ASSERT_EQ(int64_t(logits.size()), 3 * vocab);
        const std::vector<float> mine(logits.begin() + vocab, logits.begin() + 2 * vocab);
        ASSERT_EQ(std::memcmp(mine.data(), alone_logits[size_t(i)].data(), size_t(vocab) * 4), 0)
            << "step " << i << ": the logits differ from the sequence's alone";
        for (Seq* s : {&b, &a, &d}) s->tokens.push_back(argmax(logits.data() + (s == &b ? 0 : s == &a ? 1 : 2) * vocab, vocab));
    }
    EXPECT_EQ(a.tokens, alone.tokens);
}

}  // namespace
}  // namespace pagoda::model
