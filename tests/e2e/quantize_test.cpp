// `pagoda quantize` end to end: standard GGUF output with the expected types, quantised models that
// run and stay close to their base (KL divergence), and calibration that lowers the INT4 error.
#include <gtest/gtest.h>
#include <map>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"

namespace pagoda::test {
namespace {

double field_after(const std::string& text, const std::string& label) {
    auto pos = text.find(label);
    if (pos == std::string::npos) return -1;
    return std::stod(text.substr(pos + label.size()));
}

// Mean KL(base || quantised) on the evaluation text.
double kl_against(const std::string& model, const std::string& base) {
    const std::string text = source_dir() + "/tests/data/eval/tinystories_eval.txt";
    auto r = run_pagoda({"perplexity", "-m", model, "-f", text, "--ctx", "128", "--kl-base", base});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return field_after(r.out, "mean KL divergence (base || model): ");
}

TEST(Quantize, WritesStandardTypesByRule) {
    const std::string base = temp_path("q-base.gguf"), out = temp_path("q-out.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "--type", "f16", "-o", base}).exit_code, 0);
    std::map<std::string, std::map<std::string, std::string>> expected = {
        {"q8_0", {{"blk.0.attn_q.weight", "q8_0"}, {"output.weight", "q8_0"}}},
        {"q4_0", {{"blk.0.attn_q.weight", "q4_0"}, {"output.weight", "q6_K"}}},
        {"q4_k", {{"blk.0.attn_q.weight", "q4_K"}, {"output.weight", "q6_K"}}},
        {"q5_0", {{"blk.0.attn_q.weight", "q5_0"}, {"output.weight", "q6_K"}}},
        {"q5_1", {{"blk.1.ffn_down.weight", "q5_1"}}},
        {"q2_k", {{"blk.0.attn_q.weight", "q2_K"}, {"output.weight", "q6_K"}}},
        {"q3_k", {{"blk.1.ffn_up.weight", "q3_K"}}},
        {"q4_k_m", {{"blk.1.attn_v.weight", "q6_K"}, {"blk.0.attn_v.weight", "q4_K"}, {"blk.0.attn_q.weight", "q4_K"}}},
        {"int8", {{"blk.1.ffn_down.weight", "q8_0"}}},
        {"int4-g128", {{"blk.1.ffn_up.weight", "q4_1"}}},
    };
    for (const auto& [type, tensors] : expected) {
        auto r = run_pagoda({"quantize", base, out, type});
        ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
        auto file = gguf::File::open(out);
        for (const auto& [name, want] : tensors) {
            const auto* t = file->find_tensor(name);
            ASSERT_NE(t, nullptr) << name;
            EXPECT_EQ(gguf::type_name(uint32_t(t->type)), want) << type << " " << name;
        }
        EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("token_embd.weight")->type)), "f16") << type;
        EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("blk.0.attn_norm.weight")->type)), "f32") << type;
        auto run = run_pagoda({"run", "-m", out, "-p", "abc", "-n", "8", "--temp", "0", "--ids"});
        EXPECT_EQ(run.exit_code, 0) << type << ": " << run.err;
    }
}

// llama-quantize's own layout (embedding quantised to the base type, output head Q6_K): the files
// people download. They load, run, and stay close to their base; the flags reach the right tensors.
TEST(Quantize, LlamaQuantizeLayoutLoadsAndStaysClose) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    const std::string q4 = temp_path("s-q4-embd.gguf"), q8 = temp_path("s-q8-embd.gguf");
    auto r = run_pagoda({"quantize", base, q4, "q4_0", "--token-embedding-type", "q4_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--token-embedding-type"), std::string::npos) << r.out;
    ASSERT_EQ(run_pagoda({"quantize", base, q8, "q8_0", "--token-embedding-type", "q8_0"}).exit_code, 0);
    EXPECT_EQ(gguf::type_name(uint32_t(gguf::File::open(q4)->find_tensor("token_embd.weight")->type)), "q4_0");
    EXPECT_EQ(gguf::type_name(uint32_t(gguf::File::open(q8)->find_tensor("token_embd.weight")->type)), "q8_0");
    const double kl8 = kl_against(q8, base), kl4 = kl_against(q4, base);
    EXPECT_GE(kl8, 0.0);
    EXPECT_LT(kl8, 0.01);
    EXPECT_GT(kl4, kl8);
    EXPECT_LT(kl4, 0.25);

    const std::string f16 = temp_path("q-embd-base.gguf"), km = temp_path("q-embd-km.gguf");
    ASSERT_EQ(run_pagoda({"gen-model", "--preset", "tiny", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                          "--type", "f16", "-o", f16}).exit_code, 0);
    r = run_pagoda({"quantize", f16, km, "q4_k_m", "--token-embedding-type", "q4_k", "--output-tensor-type", "q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto file = gguf::File::open(km);
    EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("token_embd.weight")->type)), "q4_K");
    EXPECT_EQ(gguf::type_name(uint32_t(file->find_tensor("output.weight")->type)), "q8_0");
    auto run = run_pagoda({"run", "-m", km, "-p", "abc", "-n", "8", "--temp", "0", "--ids"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run_pagoda({"quantize", f16, km, "q4_0", "--token-embedding-type", "q1_k"}).exit_code, 0);
}

TEST(Quantize, StoriesModelStaysCloseToItsBase) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    const std::string q8 = temp_path("s-q8.gguf"), q4 = temp_path("s-q4.gguf");
    ASSERT_EQ(run_pagoda({"quantize", base, q8, "q8_0"}).exit_code, 0);
    ASSERT_EQ(run_pagoda({"quantize", base, q4, "q4_0"}).exit_code, 0);
    const double kl8 = kl_against(q8, base), kl4 = kl_against(q4, base);
    EXPECT_GE(kl8, 0.0);
    EXPECT_LT(kl8, 0.005);
    EXPECT_GT(kl4, kl8);
    EXPECT_LT(kl4, 0.15);
}

TEST(Quantize, ClippingSearchAndCalibrationLowerInt4Error) {
    const std::string base = fixture("models/stories260K.gguf");
    PAGODA_REQUIRE_FIXTURE(base);
    // Calibrate on different text than the evaluation text.
    const std::string calib = source_dir() + "/tests/data/eval/tinystories_calib.txt";
    const std::string plain = temp_path("g32-plain.gguf"), searched = temp_path("g32-search.gguf"),
                      calibrated = temp_path("g32-calib.gguf");
    ASSERT_EQ(run_pagoda({"quantize", base, plain, "int4-g32", "--plain-minmax"}).exit_code, 0);
    ASSERT_EQ(run_pagoda({"quantize", base, searched, "int4-g32"}).exit_code, 0);
    auto c = run_pagoda({"quantize", base, calibrated, "int4-g32", "--calib", calib});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("activation-scaled"), std::string::npos) << c.out;
    const double kl_plain = kl_against(plain, base), kl_search = kl_against(searched, base),
                 kl_calib = kl_against(calibrated, base);
    EXPECT_LT(kl_search, kl_plain);
    EXPECT_LT(kl_calib, kl_search);
}

TEST(Quantize, ClearErrors) {
    auto unknown = run_pagoda({"quantize", "a.gguf", "b.gguf", "q1_k"});
    EXPECT_NE(unknown.exit_code, 0);
    EXPECT_NE(unknown.err.find("type"), std::string::npos) << unknown.err;
    auto missing = run_pagoda({"quantize", "/nonexistent.gguf", temp_path("x.gguf"), "q8_0"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace pagoda::test
