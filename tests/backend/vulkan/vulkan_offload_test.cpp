// Partial offload (-ngl N, StepModelOptions::n_gpu_layers): the first N layers on the Vulkan backend,
// the rest on the cpu backend. Against the all-cpu model (the oracle here: each backend alone is
// checked against the reference elsewhere): logits within the Vulkan tests' tolerance and the same
// greedy tokens for N = 0, 1, n/2, n and n+1, on llama, gemma3 (sliding windows, post-norms, a
// tied head), qwen2moe and gpt-oss (mixture-of-experts layers, attention sinks); the KV cache split across the backends survives export/import (into another split
// model bitwise, into an all-cpu model within tolerance: the bytes keep the one-backend layout) and
// copy-on-write block copies; batch invariance holds across the split; a LoRA adapter over both
// parts gives the all-cpu adapted logits; the token embedding stays on the cpu (the device holds no copy). All on lavapipe under the validation layer; skipped without a device.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "lora/adapter.h"
#include "lora/random_adapter.h"
#include "model/arch/arch.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/layer_router.h"
#include "model/layer_split.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

RandomModelSpec spec_of(const std::string& arch) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = 4; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300; s.seed = 11;
    if (arch == "gemma3") s.swa_period = 2, s.sliding_window = 6, s.rope_theta = 1e6f;
    if (arch == "qwen2moe" || arch == "gpt-oss") s.n_experts = 4, s.expert_ffn_dim = 32;
    if (arch == "gpt-oss") s.head_dim = 16;
    return s;
}

std::shared_ptr<const gguf::File> model_file(const RandomModelSpec& s) {
    const std::string path = test::temp_path("offload_" + s.arch + ".gguf");
    write_random_model(s, nullptr, path);
    return std::shared_ptr<const gguf::File>(gguf::File::open(path));
}

StepModelOptions options(const std::string& backend, int32_t ngl) {
    return {.backend = backend, .kv = {.block_size = 4, .dtype = kv::KvDtype::f32}, .tokens_wanted = 96,
            .n_gpu_layers = ngl};
}

int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

// Within 1e-5 of the largest |expected| logit (the Vulkan tests' tolerance against the reference).
void expect_close(const std::vector<float>& got, const std::vector<float>& expected, const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    double scale = 0;
    for (float e : expected) scale = std::max(scale, std::abs(double(e)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-5 * scale) << what << ", logit " << i;
}

class PartialOffload : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { PAGODA_REQUIRE_VULKAN(); }
};

TEST_P(PartialOffload, EqualsAllCpuForEveryLayerCount) {
    const RandomModelSpec s = spec_of(GetParam());
    auto file = model_file(s);
    const std::vector<int32_t> prompt = {5, 17, 42, 7, 99, 3, 250, 64, 12};
    const int generate = 6;
    // The all-cpu run: the prompt's logits, then greedy tokens with their logits.
    auto cpu = open_step_model(file, options("cpu", -1));
    const int64_t vocab = cpu->info().vocab_size;
    SequenceRunner cpu_runner(*cpu, false);
    std::vector<std::vector<float>> expected = {cpu_runner.prefill(0, prompt, 64, true)};
    std::vector<int32_t> tokens;
    for (int i = 0; i < generate; ++i) {
        tokens.push_back(argmax(expected.back().data() + expected.back().size() - size_t(vocab), vocab));
        expected.push_back(cpu_runner.decode(0, tokens.back()));
    }
    for (int32_t ngl : {0, 1, 2, 4, 5}) {
        SCOPED_TRACE("-ngl " + std::to_string(ngl));
        auto model = open_step_model(file, options("vulkan", ngl));
        const std::string backend = model->info().backend;
        EXPECT_EQ(backend, ngl == 0 ? "cpu" : ngl > 4 ? "vulkan" : "vulkan:" + std::to_string(ngl) + "+cpu");
        SequenceRunner runner(*model, false);
        expect_close(runner.prefill(0, prompt, 64, true), expected[0], "prompt");
        for (int i = 0; i < generate; ++i) {
            const std::vector<float> row = runner.decode(0, tokens[size_t(i)]);
            expect_close(row, expected[size_t(i) + 1], "decode step " + std::to_string(i));
            ASSERT_EQ(argmax(row.data(), vocab), argmax(expected[size_t(i) + 1].data(), vocab)) << "greedy token of step " << i;
        }
    }
}

// qwen2moe and gpt-oss: mixture-of-experts layers (and gpt-oss's attention sinks) on either side.
INSTANTIATE_TEST_SUITE_P(Architectures, PartialOffload, ::testing::Values("llama", "gemma3", "qwen2moe", "gpt-oss"),
                         [](const auto& info) {
                             std::string name = info.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// One step of one sequence: `tokens` at positions from `first`, logits for the last.
std::vector<float> step(StepModel& model, const std::vector<int32_t>& tokens, int32_t first,
                        const std::vector<int32_t>& table, std::vector<kv::BlockCopy> copies = {}) {
    Batch b;
    const int32_t seq = b.add_sequence(table);
    for (size_t i = 0; i < tokens.size(); ++i) {
        const int32_t p = first + int32_t(i);
        b.add(tokens[i], p, seq, int64_t(table[size_t(p / 4)]) * 4 + p % 4, i + 1 == tokens.size());
    }
    b.block_copies = std::move(copies);
    return model.forward(b);
}

TEST(PartialOffloadKv, ExportImportAndBlockCopiesCoverBothParts) {
    PAGODA_REQUIRE_VULKAN();
    auto file = model_file(spec_of("llama"));
    const std::vector<int32_t> prompt = {5, 17, 42, 7, 99, 3};  // blocks 0 and 1 (block size 4)
    auto a = open_step_model(file, options("vulkan", 2));
    step(*a, prompt, 0, {0, 1, 2});
    const std::vector<float> next = step(*a, {64}, 6, {0, 1, 2});

    // The prompt's blocks moved into a fresh split model (other block ids) continue bitwise alike.
    const size_t bytes = a->info().kv_bytes_per_block;
    std::vector<uint8_t> block(bytes);
    auto b = open_step_model(file, options("vulkan", 2));
    for (int32_t i : {0, 1}) {
        a->export_kv_block(i, block);
        b->import_kv_block(i + 4, block);
    }
    const std::vector<float> moved = step(*b, {64}, 6, {4, 5, 6});
    ASSERT_EQ(std::memcmp(moved.data(), next.data(), next.size() * 4), 0) << "imported blocks continue otherwise";

    // Into an all-cpu model: the same byte layout, so its continuation is the cpu's within tolerance.
    auto cpu = open_step_model(file, options("cpu", -1));
    step(*cpu, prompt, 0, {0, 1, 2});
    const std::vector<float> cpu_next = step(*cpu, {64}, 6, {0, 1, 2});
    auto c = open_step_model(file, options("cpu", -1));
    for (int32_t i : {0, 1}) {
        a->export_kv_block(i, block);
        c->import_kv_block(i, block);
    }
    expect_close(step(*c, {64}, 6, {0, 1, 2}), cpu_next, "split blocks imported into an all-cpu model");

    // Copy-on-write: block 1 copied to 3 in both parts, then read through a table naming 3.
    auto d = open_step_model(file, options("vulkan", 2));
    step(*d, prompt, 0, {0, 1, 2});
    const std::vector<float> copied = step(*d, {64}, 6, {0, 3, 2}, {{1, 3}});
    ASSERT_EQ(std::memcmp(copied.data(), next.data(), next.size() * 4), 0) << "a copied block reads otherwise";
}

// A sequence's logits are bitwise the same alone and inside a batch of three, across the split.
TEST(PartialOffloadBatch, GreedyTokensAloneEqualInABatch) {
    PAGODA_REQUIRE_VULKAN();
    auto file = model_file(spec_of("llama"));
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = 4, .dtype = kv::KvDtype::f16},
                                        .tokens_wanted = 256, .n_gpu_layers = 2});
    const int64_t vocab = model->info().vocab_size;
    struct Seq {
        std::vector<int32_t> tokens;
        std::vector<int32_t> table;
        int32_t computed = 0;
    };
    auto run = [&](std::vector<Seq*> seqs) {
        Batch b;
        for (Seq* s : seqs) {
            const int32_t index = b.add_sequence(s->table);
            for (int32_t p = s->computed; p < int32_t(s->tokens.size()); ++p)
                b.add(s->tokens[size_t(p)], p, index, int64_t(s->table[size_t(p / 4)]) * 4 + p % 4,
                      p + 1 == int32_t(s->tokens.size()));
            s->computed = int32_t(s->tokens.size());
        }
        return model->forward(b);
    };
    auto table = [](int32_t first) {
        std::vector<int32_t> t;
        for (int32_t i = 0; i < 8; ++i) t.push_back(first + i);
        return t;
    };
    Seq alone{{5, 17, 42, 7, 99}, table(0)};
    std::vector<std::vector<float>> alone_logits;
    for (int i = 0; i < 6; ++i) {
        alone_logits.push_back(run({&alone}));
        alone.tokens.push_back(argmax(alone_logits.back().data(), vocab));
    }
    Seq a{{5, 17, 42, 7, 99}, table(8)}, b{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, table(16)},
        d{{200, 100, 50, 25, 12, 6, 3, 1, 2, 4}, table(24)};
    for (int i = 0; i < 6; ++i) {
        const std::vector<float> logits = run({&b, &a, &d});
        ASSERT_EQ(int64_t(logits.size()), 3 * vocab);
        ASSERT_EQ(std::memcmp(logits.data() + vocab, alone_logits[size_t(i)].data(), size_t(vocab) * 4), 0)
            << "step " << i << ": the logits differ from the sequence's alone";
        for (int k = 0; k < 3; ++k) (k == 0 ? b : k == 1 ? a : d).tokens.push_back(argmax(logits.data() + k * vocab, vocab));
    }
    EXPECT_EQ(a.tokens, alone.tokens);
}

// An adapter's updates land on both sides of the split (the device's through its own lora_add).
TEST(PartialOffloadLora, AdaptedLogitsEqualAllCpu) {
    PAGODA_REQUIRE_VULKAN();
    const RandomModelSpec spec = spec_of("llama");
    auto file = model_file(spec);
    const std::string adapter_path = test::temp_path("offload_lora.gguf");
    lora::write_random_adapter(*file, {.rank = 4, .alpha = 8, .seed = 3}, adapter_path, "");
    const std::vector<int32_t> prompt = {5, 17, 42, 7, 99, 3};
    auto logits = [&](const std::string& backend, int32_t ngl, bool adapted) {
        StepModelOptions o = options(backend, ngl);
        o.lora = true;
        auto model = open_step_model(file, o);
        SequenceRunner runner(*model, false);
        if (adapted) runner.set_lora(0, {model->load_lora(adapter_path, "a", 1.0f), 1.0f});
        std::vector<float> out = runner.prefill(0, prompt, 64, true);
        const std::vector<float> next = runner.decode(0, 64);
        out.insert(out.end(), next.begin(), next.end());
        return out;
    };
    const std::vector<float> cpu = logits("cpu", -1, true);
    expect_close(logits("vulkan", 2, true), cpu, "adapted, -ngl 2");
    // The adapter changes the logits well beyond the tolerance (so the check above sees it).
    const std::vector<float> base = logits("vulkan", 2, false);
    double most = 0;
    for (size_t i = 0; i < base.size(); ++i) most = std::max(most, std::abs(double(base[i]) - double(cpu[i])));
    EXPECT_GT(most, 1e-2);
}

// The token embedding stays on the cpu under -ngl (llama.cpp keeps its input layer on the CPU): the
// layer router gives the Vulkan backend no copy of the table, tied to the head or not, so the input
// segment's embedding op cannot be pointed at the device (it names the missing weight), while layer
// 0's ops can. EqualsAllCpuForEveryLayerCount checks the split's logits with the embedding there.
TEST(PartialOffloadEmbedding, TheDeviceHoldsNoTokenEmbedding) {
    PAGODA_REQUIRE_VULKAN();
    for (const std::string arch : {"llama", "gemma3"}) {  // gemma3's head is tied to the embedding
        SCOPED_TRACE(arch);
        const RandomModelSpec s = spec_of(arch);
        auto file = model_file(s);
        const ModelConfig config = read_config(*file);
        auto device = backend::make_backend("vulkan");
        auto host = backend::make_backend("cpu", {.n_threads = 1});
        LayerRouter router(*device, *host, {int32_t(s.n_layers), 2});
        const BuiltModel built = find_arch_builder(config.arch)(*file, config, router);
        std::vector<GraphSegment> segs = split_by_layer(built.graph, {int32_t(s.n_layers), 2});
        ASSERT_EQ(segs.size(), 3u);
        Graph input = segs[0].graph;
        try {
            router.rebind(input, Side::device);
            ADD_FAILURE() << "the Vulkan backend holds the token embedding";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("'token_embd.weight' is not on the device"), std::string::npos) << e.what();
        }
        EXPECT_NO_THROW(router.rebind(segs[0].graph, Side::host));
        EXPECT_NO_THROW(router.rebind(segs[1].graph, Side::device));
    }
}

}  // namespace
}  // namespace pagoda::model
