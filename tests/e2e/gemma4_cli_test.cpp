// gemma4 through the binary: gen-model's gemma4 form (shared KV, V = K) and its flags' errors; `run`
// greedy on the cpu, reference and Vulkan backends (the same tokens at F32), a Q8_0 file from
// `pagoda quantize`, and -ngl splits: those that keep every shared-KV layer beside the layer whose
// KV it reads run, the others are refused naming the layers.
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_env.h"
#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

// Six layers: sliding, sliding, full, sliding, sliding, full; layers 4 and 5 read layers 3 and 2's KV;
// sliding layers have 2 KV heads of 16, full layers 1 of 32 (the paged KV holds 2 of 32 on every layer).
std::string gemma4_model() {
    static const std::string path = [] {
        const std::string p = temp_path("cli-gemma4.gguf");
        auto g = run_pagoda({"gen-model", "-o", p, "--arch", "gemma4", "--layers", "6", "--head-dim", "16", "--full-head-dim", "32", "--full-kv-heads", "1",
                             "--swa-period", "3", "--sliding-window", "5", "--shared-kv-layers", "2", "--v-equals-k"});
        EXPECT_EQ(g.exit_code, 0) << g.err;
        EXPECT_NE(g.err.find("gemma4, 6 layers"), std::string::npos) << g.err;
        return p;
    }();
    return path;
}

ProcessResult run_ids(const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m", model, "-p", "once upon a time there", "-n", "12", "--temp", "0",
                                     "--ignore-eos", "--ids"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pagoda(args);
}

TEST(Gemma4Commands, GenModelAndRunOnCpuAndReference) {
    const std::string model = gemma4_model();
    auto cpu = run_ids(model, {"--backend", "cpu"});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_NE(cpu.err.find("model: gemma4"), std::string::npos) << cpu.err;
    auto ref = run_ids(model, {"--backend", "reference"});
    ASSERT_EQ(ref.exit_code, 0) << ref.err;
    EXPECT_FALSE(cpu.out.empty());
    EXPECT_EQ(cpu.out, ref.out);

    const std::string q8 = temp_path("cli-gemma4-q8_0.gguf");
    ASSERT_EQ(run_pagoda({"quantize", model, q8, "q8_0"}).exit_code, 0);
    auto q = run_ids(q8, {});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_FALSE(q.out.empty());
}

TEST(Gemma4Commands, VulkanAndGpuLayerSplits) {
    PAGODA_REQUIRE_VULKAN();
    const std::string model = gemma4_model();
    auto cpu = run_ids(model, {});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    // Layers 2 and 3 hold the shared KV: -ngl 1 and 2 keep every reader on the host beside them,
    // 6 keeps them all on the device.
    for (const char* ngl : {"1", "2", "6"}) {
        auto r = run_ids(model, {"--backend", "vulkan", "-ngl", ngl});
        ASSERT_EQ(r.exit_code, 0) << ngl << ": " << r.err;
        EXPECT_EQ(r.out, cpu.out) << "-ngl " << ngl;
    }
    auto r = run_ids(model, {"--backend", "vulkan", "-ngl", "3"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("-ngl 3: layer 5 attends over layer 2's KV (KV shared across layers)"), std::string::npos) << r.err;
    r = run_ids(model, {"--backend", "vulkan", "-ngl", "4"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("-ngl 4: layer 4 attends over layer 3's KV"), std::string::npos) << r.err;
}

// The E2B/E4B form: the per-layer embedding inputs run beside the token embedding (the device side
// of a split), each layer's block with its layer; every split gives the CPU's tokens.
TEST(Gemma4Commands, PerLayerEmbeddingsOnVulkanAndAcrossSplits) {
    PAGODA_REQUIRE_VULKAN();
    const std::string model = temp_path("cli-gemma4-ple.gguf");
    auto g = run_pagoda({"gen-model", "-o", model, "--arch", "gemma4", "--layers", "6", "--head-dim", "16", "--full-head-dim", "32",
                         "--full-kv-heads", "1", "--swa-period", "3", "--sliding-window", "5", "--shared-kv-layers", "2",
                         "--v-equals-k", "--per-layer-embd", "32"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    auto cpu = run_ids(model, {});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_FALSE(cpu.out.empty());
    for (const char* ngl : {"1", "2", "6", "7"}) {
        auto r = run_ids(model, {"--backend", "vulkan", "-ngl", ngl});
        ASSERT_EQ(r.exit_code, 0) << ngl << ": " << r.err;
        EXPECT_EQ(r.out, cpu.out) << "-ngl " << ngl;
    }
}

TEST(Gemma4Commands, GenModelRefusesFlagsOutsideItsForm) {
    auto r = run_pagoda({"gen-model", "-o", temp_path("cli-gemma4-bad.gguf"), "--shared-kv-layers", "1"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--shared-kv-layers, --v-equals-k, --full-head-dim, --full-kv-heads and --per-layer-embd are for --arch gemma4"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", temp_path("cli-gemma4-bad.gguf"), "--arch", "gemma4", "--experts", "4",
                    "--experts-used", "5"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("5 experts used of 4 is out of range"), std::string::npos) << r.err;
    // Every layer sharing leaves no layer to share with.
    r = run_pagoda({"gen-model", "-o", temp_path("cli-gemma4-bad.gguf"), "--arch", "gemma4", "--layers", "2",
                    "--shared-kv-layers", "2"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("2 shared-KV layers of 2 is out of range"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
