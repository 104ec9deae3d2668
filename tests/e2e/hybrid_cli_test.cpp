// The qwen35 / qwen35moe / qwen3next hybrids through the binary: gen-model writes them (with a NextN block, stored
// and not run), `run` greedy on the cpu and the reference backend gives the same tokens at F32, the
// load logs the state slots and the skipped NextN block; gen-model refuses a hybrid too shallow for
// its full attention layer.
#include <gtest/gtest.h>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

TEST(HybridCommands, Qwen35GenModelAndRunOnBothBackends) {
    const std::vector<std::vector<std::string>> forms = {
        {"--arch", "qwen35", "--layers", "4", "--head-dim", "16", "--nextn-layers", "1"},
        {"--arch", "qwen35moe", "--layers", "4", "--head-dim", "16", "--experts", "8", "--experts-used", "2",
         "--expert-ffn-dim", "32", "--shared-expert-ffn-dim", "48"},
        {"--arch", "qwen3next", "--layers", "4", "--head-dim", "16", "--experts", "8", "--experts-used", "2",
         "--expert-ffn-dim", "32", "--fused-qkvz"}};
    for (size_t f = 0; f < forms.size(); ++f) {
        const std::string path = temp_path("cli-hybrid-" + std::to_string(f) + ".gguf");
        std::vector<std::string> args = {"gen-model", "-o", path};
        args.insert(args.end(), forms[f].begin(), forms[f].end());
        auto g = run_pagoda(args);
        ASSERT_EQ(g.exit_code, 0) << g.err;
        std::string ids[2];
        for (int b = 0; b < 2; ++b) {
            auto r = run_pagoda({"run", "-m", path, "-p", "once upon a time there", "-n", "12", "--temp", "0", "--ids",
                                 "--backend", b == 0 ? "cpu" : "reference"});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_NE(r.err.find("recurrent state: 16 slots"), std::string::npos) << r.err;
            if (f == 0) {
                EXPECT_NE(r.err.find("1 trailing NextN (multi-token prediction) block(s) stored but not run"), std::string::npos)
                    << r.err;
            }
            ids[b] = r.out;
        }
        EXPECT_FALSE(ids[0].empty());
        EXPECT_EQ(ids[0], ids[1]);
    }
    auto r = run_pagoda({"gen-model", "-o", temp_path("cli-hybrid-bad.gguf"), "--arch", "qwen35", "--layers", "3"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("qwen35 needs at least 4 layers"), std::string::npos) << r.err;
    r = run_pagoda({"gen-model", "-o", temp_path("cli-hybrid-bad2.gguf"), "--arch", "qwen35", "--fused-qkvz"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--fused-qkvz is for --arch qwen3next"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::test
