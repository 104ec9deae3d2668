// PAGODA_AMX end to end: 0 turns the AMX tiles off and says so in the start-up plan line, 1 insists
// on them (an error naming why where they cannot run), anything else is an error in those words.
// The tokens never change: AMX is bitwise the VNNI panels.
#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

constexpr const char* kGolden = "432 383 286 261 376 298 315 421 395 317 426 338\n";

std::vector<std::string> run_args(const std::string& model) {
    return {"run", "-m", model, "-p", "Once upon a time", "-n", "12", "--temp", "0", "--ids"};
}

TEST(AmxEnv, OffOnAndBadValues) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    {
        EnvGuard env("PAGODA_AMX", "0");
        auto r = run_pagoda(run_args(model));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, kGolden);
        EXPECT_NE(r.err.find("AMX int8 tiles: not used, disabled by PAGODA_AMX=0"), std::string::npos) << r.err;
    }
    {
        EnvGuard env("PAGODA_AMX", "yes");
        auto r = run_pagoda(run_args(model));
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("PAGODA_AMX=yes is not 0 (off) or 1 (on)"), std::string::npos) << r.err;
    }
    EnvGuard env("PAGODA_AMX", "1");
    auto r = run_pagoda(run_args(model));
    if (amx_hardware_available()) {
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, kGolden);
    } else {
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("PAGODA_AMX=1 but AMX cannot run here ("), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace pagoda::test
