// --backend, --no-fusion and PAGODA_FUSION end to end: every backend and both graphs give the same
// greedy tokens as llama2.c's run.c on stories260K; `pagoda graph` shows the graph before and after
// fusion; bad values are clear errors.
#include <gtest/gtest.h>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

// From stories260K_greedy_once_upon_a_time_n200.ids.txt: the tokens after the 5 prompt tokens.
constexpr const char* kGolden = "432 383 286 261 376 298 315 421 395 317 426 338\n";

std::vector<std::string> run_args(const std::string& model) {
    return {"run", "-m", model, "-p", "Once upon a time", "-n", "12", "--temp", "0", "--ids"};
}

TEST(BackendFlags, EveryBackendAndGraphGivesTheReferenceTokens) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    for (const std::vector<std::string> extra : {std::vector<std::string>{}, {"--no-fusion"}, {"--backend", "reference"},
                                                 {"--backend", "cpu", "--no-fusion"}}) {
        auto args = run_args(model);
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = run_pagoda(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, kGolden) << (extra.empty() ? "default" : extra[0] + " " + extra.back());
    }
    EnvGuard env("PAGODA_FUSION", "0");
    auto r = run_pagoda(run_args(model));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, kGolden) << "PAGODA_FUSION=0";
}

TEST(BackendFlags, BadValuesAreClearErrors) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto args = run_args(model);
    args.insert(args.end(), {"--backend", "tpu"});
    auto r = run_pagoda(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--backend"), std::string::npos) << r.err;
    EnvGuard env("PAGODA_FUSION", "yes");
    r = run_pagoda(run_args(model));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("PAGODA_FUSION=yes is not 0 or 1"), std::string::npos) << r.err;
}

TEST(GraphCommand, PrintsTheGraphBeforeAndAfterFusion) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto r = run_pagoda({"graph", "-m", model, "--tokens", "7", "--logits", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // stories260K, 5 layers: as built, the embedding, 13 ops a layer (12 in the first, no residual add
    // before its norm) and 4 at the end; fused, 7 ops a layer and 5 others.
    EXPECT_NE(r.out.find("== as built: 71 ops"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("== as run (after fusion): 42 ops"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("qkv_rope_kv_write  blk.0.attn_in[7x64] -> blk.0.q[7x64]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("out_in[2x64] -> logits[2x512]"), std::string::npos) << r.out;
    r = run_pagoda({"graph", "-m", model, "--no-fusion"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("as run"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pagoda::test
