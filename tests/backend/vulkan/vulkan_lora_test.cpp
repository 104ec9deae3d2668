// LoRA on the Vulkan backend (vulkan_lora.h; the op itself against the reference: the conformance
// suite's LoraAdd and LoraAddIsBatchInvariant): the op records without a host wait and refuses what
// its shader cannot take by name; on a whole model the adapted model equals the merged one (the base
// with W + s·B·A written by lora::merge_adapter) and a batch mixing adapters gives each sequence
// bitwise what it gets alone.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/adapter.h"
#include "lora/merge.h"
#include "lora/random_adapter.h"
#include "model/batch.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/lora_greedy.h"
#include "model/sequence_runner.h"
#ifdef PAGODA_HAVE_VULKAN
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vulkan_lora.h"
#endif

namespace pagoda::model {
namespace {

#ifdef PAGODA_HAVE_VULKAN
using backend::LoraSegment;
using backend::testing::Side;
using backend::Tensor;
using backend::testing::random_values;

// Recording lora_add (two segments) submits nothing; reading the result is the one submission.
TEST(VulkanLora, RecordsWithoutAHostWait) {
    PAGODA_REQUIRE_VULKAN();
    std::mt19937 rng(50);
    Side vk{backend::make_backend("vulkan")};
    const int64_t n = 6, in = 40, out = 24, rank = 5;
    const std::vector<float> a = random_values(rank * in, rng), b = random_values(out * rank, rng);
    const std::vector<int32_t> rows0 = {0, 2, 5}, rows1 = {1, 4};
    const LoraSegment segs[] = {{a.data(), b.data(), rank, 0.5f, rows0}, {a.data(), b.data(), rank, 2.0f, rows1}};
    const std::vector<float> y0 = random_values(n * out, rng);
    const Tensor x = vk.input(n, in, random_values(n * in, rng)), y = vk.input(n, out, y0);
    vk->lora_add(x, y, segs);  // the pipeline built
    vk->write(y, y0.data());
    const uint64_t before = backend::vulkan::Stream::submissions();
    vk->lora_add(x, y, segs);
    EXPECT_EQ(backend::vulkan::Stream::submissions(), before) << "lora_add waited on the device";
    const std::vector<float> got = vk.read(y);
    EXPECT_EQ(backend::vulkan::Stream::submissions(), before + 1) << "the read is the one submission";
    for (int64_t o = 0; o < out; ++o) EXPECT_EQ(got[size_t(3 * out + o)], y0[size_t(3 * out + o)]) << "row 3 has no adapter";
    EXPECT_NE(got[0], y0[0]);
}

TEST(VulkanLora, RefusesWhatItsShaderCannotTakeNamingIt) {
    PAGODA_REQUIRE_VULKAN();
    Side vk{backend::make_backend("vulkan")};
    std::mt19937 rng(51);
    const int64_t rank = backend::vulkan::VulkanLora::kMaxRank + 1;
    const std::vector<float> a(size_t(rank) * 4), b(size_t(rank) * 4);
    const std::vector<int32_t> rows = {0}, outside = {3};
    const Tensor x = vk.input(2, 4, random_values(8, rng)), y = vk.input(2, 4, random_values(8, rng));
    auto expect_refused = [&](const LoraSegment& s, const std::string& words) {
        try {
            vk->lora_add(x, y, std::span(&s, 1));
            ADD_FAILURE() << "accepted: " << words;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    expect_refused({a.data(), b.data(), rank, 1.0f, rows}, "vulkan lora_add: rank 1025");
    expect_refused({a.data(), b.data(), 2, 1.0f, outside}, "row 3 is outside the step's 2 rows");
    expect_refused({nullptr, b.data(), 2, 1.0f, rows}, "without its A or B");
}

struct Files {
    std::string base, adapter_a, adapter_b;
};
const Files& files() {
    static const Files f = [] {
        Files f;
        RandomModelSpec s;
        s.n_layers = 2; s.dim = 48; s.n_heads = 6; s.n_kv_heads = 2; s.ffn_dim = 72; s.vocab_size = 300; s.seed = 12;
        f.base = test::temp_path("vulkan-lora-base.gguf");
        write_random_model(s, nullptr, f.base);
        auto base = gguf::File::open(f.base);
        f.adapter_a = test::temp_path("vulkan-lora-a.gguf");
        lora::write_random_adapter(*base, {.rank = 8, .alpha = 16, .seed = 5}, f.adapter_a, "");
        f.adapter_b = test::temp_path("vulkan-lora-b.gguf");
        lora::write_random_adapter(*base, {.rank = 4, .alpha = 4, .seed = 6, .modules = {"attn_q", "attn_v", "ffn_down"}},
                                   f.adapter_b, "");
        return f;
    }();
    return f;
}

std::unique_ptr<StepModel> open_vulkan(const std::string& path, bool lora, const std::string& backend = "vulkan",
                                       bool fusion = true) {
    return open_step_model(path, {.backend = backend, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 256,
                                  .fusion = fusion, .lora = lora});
}

using lora_test::greedy;
using lora_test::GreedyRun;
using lora_test::kPrompt;
using lora_test::max_rel_diff;

TEST(VulkanLora, AdaptedModelEqualsMergedModel) {
    PAGODA_REQUIRE_VULKAN();
    auto base_file = gguf::File::open(files().base);
    const lora::Adapter merged_adapter = lora::load_adapter(files().adapter_a, *base_file, "a", 0.8f);
    const std::string merged = test::temp_path("vulkan-lora-merged.gguf");
    lora::merge_adapter(*base_file, merged_adapter, 0.8f).write(merged);

    auto model = open_vulkan(files().base, true);
    auto adapter = model->load_lora(files().adapter_a, "a", 0.8f);
    const GreedyRun adapted = greedy(*model, {adapter, 0.8f}, 8);
    const GreedyRun base = greedy(*model, {}, 8);
    auto merged_model = open_vulkan(merged, false);
    const GreedyRun want = greedy(*merged_model, {}, 8);
    EXPECT_EQ(adapted.tokens, want.tokens);
    // f32 throughout: B·(A·x) added after the matmul against (W + s·B·A)·x, rounded once per weight.
    EXPECT_LT(max_rel_diff(adapted.logits, want.logits), 1e-5);
    EXPECT_GT(max_rel_diff(base.logits, want.logits), 1e-2) << "the adapter matters";
}

// The adapter inside the fused ops (fuses_lora: the QKV and gate|up updates in
// qkv_rope_kv_write and matmul_silu_mul) gives bitwise the unfused graph's logits, and the CPU's
// tokens with logits within f32 rounding of the CPU's.
TEST(VulkanLora, FusedAdapterStepsAreBitwiseUnfusedAndMatchTheCpu) {
    PAGODA_REQUIRE_VULKAN();
    ASSERT_TRUE(backend::make_backend("vulkan")->fuses_lora());
    auto fused = open_vulkan(files().base, true);
    auto unfused = open_vulkan(files().base, true, "vulkan", false);
    auto cpu = open_vulkan(files().base, true, "cpu");
    const GreedyRun got = greedy(*fused, {fused->load_lora(files().adapter_a, "a", 0.8f), 0.8f});
    const GreedyRun plain = greedy(*unfused, {unfused->load_lora(files().adapter_a, "a", 0.8f), 0.8f});
    const GreedyRun want = greedy(*cpu, {cpu->load_lora(files().adapter_a, "a", 0.8f), 0.8f});
    ASSERT_EQ(got.logits.size(), plain.logits.size());
    EXPECT_EQ(0, std::memcmp(got.logits.data(), plain.logits.data(), got.logits.size() * 4)) << "fused LoRA differs from unfused";
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_LT(max_rel_diff(got.logits, want.logits), 1e-4);
    EXPECT_GT(max_rel_diff(greedy(*fused, {}).logits, want.logits), 1e-2) << "the adapter matters";
}

// One step mixing two adapters, a scaled one and base rows gives each sequence bitwise what it gets alone.
TEST(VulkanLora, MixedBatchIsBatchInvariant) {
    PAGODA_REQUIRE_VULKAN();
    auto model = open_vulkan(files().base, true);
    auto a = model->load_lora(files().adapter_a, "a", 1);
    auto b = model->load_lora(files().adapter_b, "b", 1);
    const std::vector<lora::AdapterRef> refs = {{a, 1.0f}, {}, {b, 1.0f}, {a, 0.5f}};
    const int32_t block = model->info().block_size;
    auto run_step = [&](const std::vector<size_t>& which) {
        Batch batch;
        for (size_t i : which) {
            std::vector<int32_t> table;
            for (int32_t j = 0; j < 3; ++j) table.push_back(int32_t(i) * 4 + j);
            const int32_t s = batch.add_sequence(table, refs[i]);
            for (int32_t p = 0; p < int32_t(kPrompt.size()); ++p)
                batch.add(kPrompt[size_t(p)] + int32_t(i % 2), p, s, int64_t(table[size_t(p / block)]) * block + p % block, true);
        }
        return model->forward(batch);
    };
    const std::vector<float> together = run_step({0, 1, 2, 3});
    const size_t per = kPrompt.size() * size_t(model->info().vocab_size);
    auto part = [&](size_t i) { return std::vector<float>(together.begin() + long(i * per), together.begin() + long((i + 1) * per)); };
    for (size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(run_step({i}), part(i)) << "sequence " << i;
    EXPECT_NE(part(0), part(2));
    EXPECT_NE(part(1), part(3));
}
#endif

}  // namespace
}  // namespace pagoda::model
