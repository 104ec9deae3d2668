// `pagoda bench` and `pagoda perplexity` end to end; the perplexity against one computed here from
// the reference backend's logits.
#include <cmath>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"
#include "tokenizer/tokenizer.h"

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
        // The share of CPU time the hypervisor took during the timed runs: null only without /proc/stat.
        const auto& steal = j.at("steal_share");
        if (std::ifstream("/proc/stat")) {
            ASSERT_TRUE(steal.is_number()) << line;
            EXPECT_GE(steal.get<double>(), 0.0);
            EXPECT_LE(steal.get<double>(), 1.0);
        } else {
            EXPECT_TRUE(steal.is_null()) << line;
        }
    }
    EXPECT_EQ(tests, (std::vector<std::string>{"pp16", "tg8"}));
    auto table = run_pagoda({"bench", "-m", path, "-p", "16", "-n", "8", "-r", "1", "--no-limits"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    if (std::ifstream("/proc/stat")) {
        EXPECT_NE(table.out.find("CPU time stolen by the hypervisor during the timed runs (/proc/stat steal): pp16 "),
                  std::string::npos)
            << table.out;
    }
}

// --depth: the generation test starts after that many tokens of context, and says so in its name;
// with a q8 cache too.
TEST(BenchCommand, DepthNamesTheTestAndRunsWithAQ8Cache) {
    const std::string path = temp_path("bench-depth.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", path}).exit_code, 0);
    auto r = run_pagoda({"bench", "-m", path, "-p", "0", "-n", "4", "-d", "40", "-r", "1", "--json", "--no-limits",
                         "--kv-type", "q8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
    EXPECT_EQ(j.at("test"), "tg4 @ d40");
    EXPECT_GT(j.at("tokens_per_s").get<double>(), 0);
}

// --op-times: each test's steps split by op. With -r 2 the timed steps are the two repetitions'
// (not the warm-up, not the --depth prefill): pp16 in one chunk is 1 step a repetition, tg8 is 8;
// per step, the tiny llama graph's ops (2 layers: 2 attention ops, 1 embedding).
TEST(BenchCommand, OpTimesSplitEachTestsStepsByOp) {
    const std::string path = temp_path("bench-ops.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", path}).exit_code, 0);
    auto r = run_pagoda({"bench", "-m", path, "-p", "16", "-n", "8", "-d", "4", "-r", "2", "--json", "--no-limits",
                         "--op-times"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::map<std::string, int64_t> steps;
    while (std::getline(lines, line)) {
        auto j = nlohmann::json::parse(line);
        const auto& t = j.at("op_times");
        steps[j.at("test")] = t.at("steps").get<int64_t>();
        const auto& ops = t.at("ops");
        EXPECT_EQ(ops.at("attention").at("calls_per_step").get<double>(), 2.0) << line;
        EXPECT_EQ(ops.at("embed").at("calls_per_step").get<double>(), 1.0) << line;
        double sum = 0;
        for (const auto& [name, op] : ops.items()) sum += op.at("us_per_step").get<double>();
        EXPECT_GT(sum, 0) << line;
        EXPECT_LE(sum, t.at("us_per_step").get<double>()) << line;
        // By weight: the tiny preset's 2 layers' projections and the output head, each with its bytes.
        const auto& weights = t.at("weights");
        EXPECT_EQ(weights.at("attention q|k|v").at("calls_per_step").get<double>(), 2.0) << line;
        EXPECT_EQ(weights.at("output head").at("calls_per_step").get<double>(), 1.0) << line;
        for (const auto& [name, w] : weights.items()) {
            EXPECT_GT(w.at("bytes_per_step").get<double>(), 0) << name;
            EXPECT_GE(w.at("gb_per_s").get<double>(), 0) << name;
        }
    }
    EXPECT_EQ(steps, (std::map<std::string, int64_t>{{"pp16", 2}, {"tg8 @ d4", 16}}));
    // The table form: one per test, ending with the time between ops.
    auto table = run_pagoda({"bench", "-m", path, "-p", "16", "-n", "8", "-r", "1", "--no-limits", "--op-times"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("ops of pp16: 1 steps"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("ops of tg8: 8 steps"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("| attention "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("| (between ops) "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("weights of tg8: the ops above that stream them"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("| output head "), std::string::npos) << table.out;
}

struct Oracle {
    double perplexity = 0;
    int64_t scored = 0;
};

// Perplexity as `pagoda perplexity` defines it (apps/cmd_perplexity.cpp): windows of BOS + ctx - 1
// text tokens, the second half of each scored, exp of the mean negative log-likelihood.
Oracle reference_perplexity(const std::string& model_path, const std::string& text_path, int ctx, int max_windows) {
    auto file = std::shared_ptr<const gguf::File>(gguf::File::open(model_path));
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    std::ifstream in(text_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::vector<int32_t> ids = tok->encode(text, {.add_bos = false, .add_eos = false});
    auto reference = model::open_step_model(file, {.backend = "reference", .kv = {.dtype = kv::KvDtype::f32}, .tokens_wanted = ctx});
    model::SequenceRunner runner(*reference, false);
    const int64_t vocab = reference->info().vocab_size, body = ctx - 1;
    long double nll = 0;
    Oracle o;
    for (int64_t w = 0; w < std::min<int64_t>(max_windows, int64_t(ids.size()) / body); ++w) {
        std::vector<int32_t> window = {tok->bos()};
        window.insert(window.end(), ids.begin() + w * body, ids.begin() + (w + 1) * body);
        const std::vector<float> logits = runner.prefill(w, window, ctx, true);
        runner.release(w);
        for (int64_t p = ctx / 2; p + 1 < ctx; ++p) {
            const float* row = logits.data() + p * vocab;
            long double top = row[0], z = 0;
            for (int64_t i = 1; i < vocab; ++i) top = std::max<long double>(top, row[i]);
            for (int64_t i = 0; i < vocab; ++i) z += std::exp((long double)row[i] - top);
            nll += top + std::log(z) - row[window[size_t(p + 1)]];
            ++o.scored;
        }
    }
    o.perplexity = double(std::exp(nll / (long double)o.scored));
    return o;
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
    // The oracle: the same windows scored from the reference backend's logits (double-precision
    // loops), with the log-softmax in long double here. The CLI runs the CPU backend in f32; on
    // this F32 model its logits agree with the reference's to ~1e-5, so the perplexities to 1e-3.
    const Oracle want = reference_perplexity(model, text, 128, 6);
    EXPECT_EQ(want.scored, 6 * 63) << "ctx 128: BOS + 127 text tokens a window, positions 64..126 scored";
    EXPECT_NE(r.out.find(fmt::format("6 windows of 128, {} scored", want.scored)), std::string::npos) << r.out;
    EXPECT_NEAR(ppl, want.perplexity, 1e-3 * want.perplexity) << r.out;
    // A trained TinyStories model on TinyStories-style text: far below the uniform 512.
    EXPECT_LT(want.perplexity, 20.0);

    // Against itself: zero divergence and full agreement.
    auto self = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "64", "--max-windows", "2", "--kl-base", model});
    ASSERT_EQ(self.exit_code, 0) << self.err;
    EXPECT_NE(self.out.find("mean KL divergence (base || model): 0.000000"), std::string::npos) << self.out;
    EXPECT_NE(self.out.find("top-1 agreement: 100.00 %"), std::string::npos) << self.out;
}

// The same model with a q8 KV cache against its f16 cache: a small, nonzero divergence, and each
// side's cache type named in the report.
TEST(PerplexityCommand, Q8CacheAgainstTheF16CacheOfTheSameModel) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto r = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "64", "--max-windows", "2", "--kv-type", "q8",
                         "--kl-base", model, "--kl-base-kv-type", "f16"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("KV cache q8"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("KV cache f16, perplexity"), std::string::npos) << r.out;
    const auto pos = r.out.find("mean KL divergence (base || model): ");
    ASSERT_NE(pos, std::string::npos) << r.out;
    const double kl = std::stod(r.out.substr(pos + 36));
    EXPECT_GT(kl, 0.0) << r.out;   // the cache really is quantised
    EXPECT_LT(kl, 0.01) << r.out;  // measured 0.0019 at ctx 128 (docs/benchmarks.md)
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
    auto no_base = run_pagoda({"perplexity", "-m", path, "-f", small_text, "--kl-base-kv-type", "f16"});
    EXPECT_EQ(no_base.exit_code, 1);
    EXPECT_NE(no_base.err.find("--kl-base-kv-type needs --kl-base"), std::string::npos) << no_base.err;
    auto bad_type = run_pagoda({"perplexity", "-m", path, "-f", small_text, "--kv-type", "q4"});
    EXPECT_EQ(bad_type.exit_code, 1);
    EXPECT_NE(bad_type.err.find("--kv-type"), std::string::npos) << bad_type.err;
}

}  // namespace
}  // namespace pagoda::test
