// `--lora-dtype` through the command line (numerics: tests/model/lora_model_test.cpp): run takes
// exact, bf16 and f16 with an adapter and gives the adapted tokens (not the base model's), and the
// flag is refused naming itself without an adapter or with an unknown type.
#include <gtest/gtest.h>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

TEST(LoraDtypeCli, RunTakesEachStorageAndRefusesMisuse) {
    const std::string model = temp_path("lora-dtype-base.gguf"), adapter = temp_path("lora-dtype-a.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", model, "--lora-out", adapter}).exit_code, 0);
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0", "--ids"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_pagoda(args);
    };
    const ProcessResult base = run({});
    ASSERT_EQ(base.exit_code, 0) << base.err;
    for (const std::string dtype : {"exact", "bf16", "f16"}) {
        const ProcessResult r = run({"--lora", "a=" + adapter, "--lora-dtype", dtype});
        ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
        EXPECT_NE(r.out, base.out) << dtype << ": the adapter changed nothing";
    }
    const ProcessResult alone = run({"--lora-dtype", "bf16"});
    EXPECT_NE(alone.exit_code, 0);
    EXPECT_NE(alone.err.find("--lora-dtype stores LoRA adapters"), std::string::npos) << alone.err;
    const ProcessResult bad = run({"--lora", "a=" + adapter, "--lora-dtype", "fp8"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--lora-dtype: 'fp8' is not a LoRA storage type"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace pagoda::test
