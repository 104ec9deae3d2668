// PAGODA_FLOAT_METHOD end to end: every method runs an F16 model (one the CPU lacks falls back to
// f32 FMA); any other value is a clear error, naming the choices.
#include <gtest/gtest.h>

#include <cstdlib>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

TEST(FloatMethodEnv, BothMethodsRunAndOtherValuesAreRejected) {
    const std::string path = temp_path("float-method-f16.gguf");
    auto gen = run_pagoda({"gen-model", "--preset", "tiny", "--type", "f16", "-o", path});
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    const std::vector<std::string> args = {"run", "-m", path, "-p", "abc", "-n", "8", "--temp", "0", "--ids"};
    for (const char* method : {"f32_fma", "bf16_dot", "amx_bf16"}) {
        EnvGuard env("PAGODA_FLOAT_METHOD", method);
        auto r = run_pagoda(args);
        EXPECT_EQ(r.exit_code, 0) << method << ": " << r.err;
        EXPECT_FALSE(r.out.empty()) << method;
    }
    EnvGuard env("PAGODA_FLOAT_METHOD", "fp8");
    auto bad = run_pagoda(args);
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("PAGODA_FLOAT_METHOD=fp8"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("amx_bf16"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace pagoda::test
