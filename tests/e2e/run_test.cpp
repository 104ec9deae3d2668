// `pagoda run` end to end: stories260K text and ids against llama2.c's outputs, gen-model models,
// and clear errors for bad flags and files.
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "e2e/process.h"
#include "fixtures.h"

namespace pagoda::test {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

struct TextGolden {
    std::string file, prompt;
    int n_new;  // run.c's -n counts positions including BOS and the prompt
};

class RunGolden : public ::testing::TestWithParam<TextGolden> {};

TEST_P(RunGolden, GreedyTextMatchesReference) {
    const auto& g = GetParam();
    const std::string model = fixture("models/stories260K.gguf"), golden = fixture("models/golden/" + g.file);
    PAGODA_REQUIRE_FIXTURE(model);
    PAGODA_REQUIRE_FIXTURE(golden);
    auto r = run_pagoda({"run", "-m", model, "-p", g.prompt, "-n", std::to_string(g.n_new), "--temp", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // run.c prints the prompt's pieces first; pagoda prints only the continuation.
    EXPECT_EQ(g.prompt + r.out, read_file(golden));
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Stories260K, RunGolden,
    ::testing::Values(TextGolden{"stories260K_greedy_noprompt_n200.txt", "", 200},
                      TextGolden{"stories260K_greedy_noprompt_n256.txt", "", 256},
                      TextGolden{"stories260K_greedy_noprompt_n512.txt", "", 512},
                      TextGolden{"stories260K_greedy_once_upon_a_time_n200.txt", "Once upon a time", 196},
                      TextGolden{"stories260K_greedy_tom_dog_n200.txt", "Tom and his dog went to the park.", 186}),
    [](const auto& info) {
        std::string n = info.param.file.substr(std::string("stories260K_greedy_").size());
        return n.substr(0, n.find('.'));
    });

// Speculative decoding leaves greedy text unchanged: prompt lookup, and a Q8_0 copy of the model
// drafting for it; both report their drafts.
TEST(Run, SpeculationKeepsTheGoldenText) {
    const std::string model = fixture("models/stories260K.gguf");
    const std::string golden = fixture("models/golden/stories260K_greedy_once_upon_a_time_n200.txt");
    PAGODA_REQUIRE_FIXTURE(model);
    PAGODA_REQUIRE_FIXTURE(golden);
    const std::string draft = temp_path("run-draft-q8.gguf");
    auto q = run_pagoda({"quantize", model, draft, "q8_0"});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    // The goldens whose budget fits the context either way (the engine stores its last token).
    const std::vector<TextGolden> goldens = {{"stories260K_greedy_noprompt_n200.txt", "", 200},
                                             {"stories260K_greedy_once_upon_a_time_n200.txt", "Once upon a time", 196},
                                             {"stories260K_greedy_tom_dog_n200.txt", "Tom and his dog went to the park.", 186}};
    for (const TextGolden& g : goldens)
        for (const std::vector<std::string>& flags :
             {std::vector<std::string>{"--draft-ngram", "3"}, std::vector<std::string>{"--draft-model", draft},
              std::vector<std::string>{"-md", draft, "--draft-max", "3"}}) {
            std::vector<std::string> args = {"run", "-m", model, "-p", g.prompt, "-n", std::to_string(g.n_new), "--temp", "0"};
            args.insert(args.end(), flags.begin(), flags.end());
            auto r = run_pagoda(args);
            ASSERT_EQ(r.exit_code, 0) << flags[0] << ": " << r.err;
            EXPECT_EQ(g.prompt + r.out, read_file(fixture("models/golden/" + g.file))) << g.file << " " << flags[0];
            EXPECT_NE(r.err.find("speculation: "), std::string::npos) << r.err;
            EXPECT_EQ(r.err.find("speculation: 0 drafted"), std::string::npos) << r.err;
        }
    auto both = run_pagoda({"run", "-m", model, "--draft-ngram", "3", "--draft-model", draft});
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
    // A draft of another tokenizer (a synthetic vocabulary of the same size) is refused by name.
    const std::string foreign = temp_path("run-draft-foreign.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--vocab-size", "512", "-o", foreign}).exit_code, 0);
    auto refused = run_pagoda({"run", "-m", model, "-n", "4", "--draft-model", foreign});
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("a draft model must share the model's tokenizer"), std::string::npos) << refused.err;
}

TEST(Run, IdsModePrintsGeneratedIds) {
    const std::string model = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(model);
    auto r = run_pagoda({"run", "-m", model, "-p", "Once upon a time", "-n", "5", "--temp", "0", "--ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // From stories260K_greedy_once_upon_a_time_n200.ids.txt: the tokens after the 5 prompt tokens.
    EXPECT_EQ(r.out, "432 383 286 261 376\n");
}

TEST(Run, SeededSamplingIsReproducible) {
    const std::string path = temp_path("run-seeded.gguf");
    auto gen = run_pagoda({"gen-model", "--preset", "tiny", "-o", path});
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    std::vector<std::string> args = {"run", "-m", path, "-p", "hello", "-n", "24", "--temp", "0.9", "--seed", "7", "--ids"};
    auto a = run_pagoda(args), b = run_pagoda(args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());
    // Keyed sampling: the engine's speculative path (prompt lookup) draws the same tokens as the
    // plain loop, and another seed draws others. (--ignore-eos: the two paths end a generation on
    // different tokens, the plain loop on BOS too.)
    auto plain_args = args;
    plain_args.push_back("--ignore-eos");
    auto plain = run_pagoda(plain_args);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    auto spec_args = plain_args;
    spec_args.insert(spec_args.end(), {"--draft-ngram", "2"});
    auto spec = run_pagoda(spec_args);
    ASSERT_EQ(spec.exit_code, 0) << spec.err;
    EXPECT_EQ(spec.out, plain.out);
    auto other_args = plain_args;
    other_args[other_args.size() - 3] = "8";  // --seed 8
    auto other = run_pagoda(other_args);
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_NE(other.out, plain.out);
}

TEST(Run, EveryFloatTypeAndBlockSizeRuns) {
    for (const char* type : {"f32", "f16", "bf16"}) {
        const std::string path = temp_path(std::string("run-") + type + ".gguf");
        auto gen = run_pagoda({"gen-model", "--preset", "tiny", "--type", type, "-o", path});
        ASSERT_EQ(gen.exit_code, 0) << gen.err;
        std::string first;
        for (const char* bs : {"1", "16", "256"}) {
            auto r = run_pagoda({"run", "-m", path, "-p", "abc", "-n", "20", "--temp", "0", "--ids", "--block-size", bs});
            ASSERT_EQ(r.exit_code, 0) << type << " block " << bs << ": " << r.err;
            if (first.empty()) first = r.out;
            EXPECT_EQ(r.out, first) << type << " block " << bs;
        }
    }
}

TEST(Run, ClearErrors) {
    auto missing = run_pagoda({"run", "-m", "/nonexistent/model.gguf", "-p", "x"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;

    const std::string junk = temp_path("junk.gguf");
    std::ofstream(junk) << "this is not a gguf file";
    auto bad = run_pagoda({"run", "-m", junk});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("magic"), std::string::npos) << bad.err;

    auto flag = run_pagoda({"run", "-m", junk, "--top-p", "7"});
    EXPECT_NE(flag.exit_code, 0);
    EXPECT_NE(flag.err.find("top-p"), std::string::npos) << flag.err;

    const std::string path = temp_path("run-kv.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "-o", path}).exit_code, 0);
    auto tiny_kv = run_pagoda({"run", "-m", path, "-p", "abc", "-n", "100", "--kv-memory", "1KiB"});
    EXPECT_EQ(tiny_kv.exit_code, 1);
    EXPECT_NE(tiny_kv.err.find("kv-memory"), std::string::npos) << tiny_kv.err;
    auto full_kv = run_pagoda({"run", "-m", path, "-p", "abc", "-n", "500", "--temp", "0", "--ignore-eos",
                               "--kv-memory", "64KiB"});
    EXPECT_EQ(full_kv.exit_code, 1);
    EXPECT_NE(full_kv.err.find("KV cache"), std::string::npos) << full_kv.err;
}

}  // namespace
}  // namespace pagoda::test
