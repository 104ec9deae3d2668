// stories260K against the outputs of its original reference implementation (llama2.c run.c):
// greedy continuations token for token, and logits at the first positions within tolerance.
#include <algorithm>
#include <gtest/gtest.h>

#include "fixtures.h"
#include "model/golden_file.h"
#include "model/open_step_model.h"
#include "model/sequence_runner.h"

namespace pagoda::model {
namespace {

using Golden = test::GoldenIds;


int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

struct GoldenCase {
    std::string file;
    int32_t block_size;
    std::string backend = "cpu";
    bool fusion = true;
};
void PrintTo(const GoldenCase& c, std::ostream* os) {
    *os << c.file << " block " << c.block_size << " " << c.backend << (c.fusion ? "" : " unfused");
}

std::unique_ptr<StepModel> open(const std::string& path, const GoldenCase& c) {
    return open_step_model(path, {.backend = c.backend, .threads = 2, .kv = {.block_size = c.block_size},
                                  .tokens_wanted = 513, .fusion = c.fusion});
}

class Stories260K : public ::testing::TestWithParam<GoldenCase> {};

// Feeds the prompt as one batch, then decodes greedily one token at a time, as `pagoda run` does.
TEST_P(Stories260K, GreedyDecodeReproducesReference) {
    const std::string model_path = test::fixture("models/stories260K.gguf");
    const std::string golden_path = test::fixture("models/golden/" + GetParam().file);
    PAGODA_REQUIRE_FIXTURE(model_path);
    PAGODA_REQUIRE_FIXTURE(golden_path);
    Golden g = test::read_golden_ids(golden_path);
    ASSERT_FALSE(g.prompt.empty());
    ASSERT_GT(g.tokens.size(), g.prompt.size());
    auto model = open(model_path, GetParam());
    const int64_t vocab = model->info().vocab_size;
    SequenceRunner runner(*model);

    std::vector<float> logits = runner.prefill(0, g.prompt);
    std::vector<int32_t> produced = g.prompt;
    while (produced.size() < g.tokens.size()) {
        int32_t next = argmax(logits.data(), vocab);
        produced.push_back(next);
        logits = runner.decode(0, next);
    }
    EXPECT_EQ(produced, g.tokens);
    // run.c stops when it samples BOS; a golden shorter than its budget must end right before one.
    if (g.tokens.size() < 512 && GetParam().file.find("n512") != std::string::npos) {
        EXPECT_EQ(argmax(logits.data(), vocab), 1);
    }
}

// Teacher-forced: the whole golden sequence in chunks; every position's logits are checked.
TEST_P(Stories260K, LogitsMatchReferenceWithinTolerance) {
    const std::string model_path = test::fixture("models/stories260K.gguf");
    const std::string golden_path = test::fixture("models/golden/" + GetParam().file);
    PAGODA_REQUIRE_FIXTURE(model_path);
    PAGODA_REQUIRE_FIXTURE(golden_path);
    Golden g = test::read_golden_ids(golden_path);
    auto model = open(model_path, GetParam());
    const int64_t vocab = model->info().vocab_size;
    SequenceRunner runner(*model);
    std::vector<float> logits = runner.prefill(0, g.tokens, /*chunk=*/37, /*all_logits=*/true);
    ASSERT_EQ(int64_t(logits.size()), int64_t(g.tokens.size()) * vocab);
    for (size_t p = g.prompt.size() - 1; p + 1 < g.tokens.size(); ++p)
        ASSERT_EQ(argmax(logits.data() + p * vocab, vocab), g.tokens[p + 1]) << "position " << p;
    // Tolerance: run.c accumulates in f32 in another order; 1e-4 absolute on logits of magnitude ~10.
    for (const auto& [pos, expected] : g.logits) {
        ASSERT_EQ(int64_t(expected.size()), vocab);
        for (int64_t i = 0; i < vocab; ++i)
            ASSERT_NEAR(logits[size_t(pos * vocab + i)], expected[size_t(i)], 1e-4) << "pos " << pos << " logit " << i;
    }
}

std::vector<GoldenCase> golden_cases() {
    std::vector<GoldenCase> out;
    for (const char* f : {"stories260K_greedy_noprompt_n200.ids.txt", "stories260K_greedy_noprompt_n512.ids.txt",
                          "stories260K_greedy_once_upon_a_time_n200.ids.txt", "stories260K_greedy_tom_dog_n200.ids.txt"}) {
        for (int32_t bs : {1, 16, 256}) out.push_back({f, bs});
        out.push_back({f, 16, "cpu", false});   // the unfused graph
        for (const auto& backend : available_backends())
            if (backend != "cpu") out.push_back({f, 16, backend});  // every other backend, e.g. the reference
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Goldens, Stories260K, ::testing::ValuesIn(golden_cases()), [](const auto& info) {
    std::string n = info.param.file.substr(std::string("stories260K_greedy_").size());
    n = n.substr(0, n.find('.'));
    return n + "_block" + std::to_string(info.param.block_size) + "_" + info.param.backend +
           (info.param.fusion ? "" : "_unfused");
});

}  // namespace
}  // namespace pagoda::model
