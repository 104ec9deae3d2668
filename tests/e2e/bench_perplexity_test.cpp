// `pagoda bench` and `pagoda perplexity` end to end.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

TEST(BenchCommand, JsonLinesCarryTheFields) {
    const std::string path = temp_path("bench.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", path}).exit_code, 0);
    auto r = run_pagoda({"bench", "-m", path, "-p", "16", "-n", "8", "-r", "2", "--json", "--no-limits"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::vector<std::string> tests;
    while (std::getline(lines, line)) {
        auto j = nlohmann::json::parse(line);
        tests.push_back(j.at("test"));
        EXPECT_GT(j.at("tokens_per_s").get<double>(), 0);
        EXPECT_GE(j.at("stddev").get<double>(), 0);
        EXPECT_GE(j.at("threads").get<int>(), 1);
        EXPECT_GT(j.at("model_bytes").get<int64_t>(), 0);
        EXPECT_EQ(j.at("reps").get<int>(), 2);
    }
    EXPECT_EQ(tests, (std::vector<std::string>{"pp16", "tg8"}));
}

TEST(PerplexityCommand, StoriesModelOnOurEvaluationText) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto r = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "128", "--max-windows", "6"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto pos = r.out.find("perplexity: ");
    ASSERT_NE(pos, std::string::npos) << r.out;
    double ppl = std::stod(r.out.substr(pos + 12));
    // A trained TinyStories model on TinyStories-style text: far below the uniform 512.
    EXPECT_GT(ppl, 1.5);
    EXPECT_LT(ppl, 20.0);

    // Against itself: zero divergence and full agreement.
    auto self = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "64", "--max-windows", "2", "--kl-base", model});
    ASSERT_EQ(self.exit_code, 0) << self.err;
    EXPECT_NE(self.out.find("mean KL divergence (base || model): 0.000000"), std::string::npos) << self.out;
    EXPECT_NE(self.out.find("top-1 agreement: 100.00 %"), std::string::npos) << self.out;
}

TEST(PerplexityCommand, ClearErrors) {
    const std::string path = temp_path("ppl.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", path}).exit_code, 0);
    auto missing = run_pagoda({"perplexity", "-m", path, "-f", "/nonexistent.txt"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent.txt"), std::string::npos);
    const std::string small_text = temp_path("short.txt");
    { std::ofstream(small_text) << "hi"; }
    auto too_short = run_pagoda({"perplexity", "-m", path, "-f", small_text, "--ctx", "64"});
    EXPECT_EQ(too_short.exit_code, 1);
    EXPECT_NE(too_short.err.find("too short"), std::string::npos) << too_short.err;
}

}  // namespace
}  // namespace pagoda::test
