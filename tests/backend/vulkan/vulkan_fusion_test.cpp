// The fused ops on Vulkan in a whole model: stories260K (a tiny llama) decoding with the fusion pass
// on and off (PAGODA_FUSION) gives bitwise the same logits every step (each fused op is bitwise its
// unfused sequence on this backend), in fewer dispatches per decode step: add_rms_norm saves one per
// norm after a residual add, qkv_rope_kv_write three of six and more with biases, matmul_silu_mul
// two of three. Prints the dispatches per step, what docs/benchmarks.md quotes (its ms per step
// come from `pagoda bench` with PAGODA_FUSION=0 / 1: timing here would be too short and ordered).
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>

#ifdef PAGODA_HAVE_VULKAN  // the stream counters exist only where the backend is built
#include "backend/vulkan/vk_context.h"
#endif
#include "backend/vulkan/vulkan_test_env.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/open_step_model.h"

namespace pagoda::model {
namespace {

#ifdef PAGODA_HAVE_VULKAN

using backend::vulkan::Stream;

struct DecodeRun {
    std::vector<std::vector<float>> logits;
    int32_t n_layers = 0;
    double dispatches = 0;  // per timed step
};

// One sequence of 8 prompt tokens then `steps` greedy decode steps counted after 2 warm ones, with
// the fusion pass on or off ("1" / "0").
DecodeRun decode(const char* fusion, int steps) {
    setenv("PAGODA_FUSION", fusion, 1);
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(test::fixture("models/stories260K.gguf")));
    auto model = open_step_model(file, {.backend = "vulkan", .kv = {.block_size = 16, .dtype = kv::KvDtype::f16}, .tokens_wanted = 1024});
    unsetenv("PAGODA_FUSION");
    DecodeRun run;
    run.n_layers = model->info().kv_layout.n_layers;
    const int64_t vocab = model->info().vocab_size;
    std::vector<int32_t> tokens = {1, 2, 30, 40, 50, 60, 70, 80};
    int32_t computed = 0;
    uint64_t dispatches = 0;
    for (int s = 0; s < steps + 3; ++s) {
        if (s == 3) dispatches = Stream::all_dispatches();
        Batch b;
        const int32_t index = b.add_sequence({0, 1, 2, 3});
        const int32_t len = int32_t(tokens.size());
        for (int32_t p = computed; p < len; ++p) b.add(tokens[size_t(p)], p, index, p, p + 1 == len);
        computed = len;
        std::vector<float> logits = model->forward(b);
        tokens.push_back(int32_t(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin()));
        run.logits.push_back(std::move(logits));
    }
    run.dispatches = double(Stream::all_dispatches() - dispatches) / steps;
    return run;
}

TEST(VulkanFusion, FusedDecodeIsBitwiseUnfusedInFewerDispatches) {
    PAGODA_REQUIRE_VULKAN();
    const DecodeRun unfused = decode("0", 20), fused = decode("1", 20);
    ASSERT_EQ(unfused.logits.size(), fused.logits.size());
    for (size_t s = 0; s < fused.logits.size(); ++s) {
        ASSERT_EQ(unfused.logits[s].size(), fused.logits[s].size());
        EXPECT_EQ(0, std::memcmp(unfused.logits[s].data(), fused.logits[s].data(), fused.logits[s].size() * 4)) << "step " << s;
    }
    // Per layer: qkv_rope_kv_write saves 3 (6 -> 3), matmul_silu_mul 2 (3 -> 1), add_rms_norm 1 or 2.
    EXPECT_GE(unfused.dispatches - fused.dispatches, 6.0 * fused.n_layers)
        << unfused.dispatches << " unfused, " << fused.dispatches << " fused, " << fused.n_layers << " layers";
    for (const auto& [name, r] : {std::pair{"unfused", unfused}, std::pair{"fused", fused}})
        std::cout << fmt::format("stories260K decode, batch 1, {:>7}: {:.0f} dispatches/step\n", name, r.dispatches);
}

#endif  // PAGODA_HAVE_VULKAN

}  // namespace
}  // namespace pagoda::model
