// gen-model's attention temperature (--attn-temperature-scale, --attn-temperature-length): the keys
// llama.cpp reads land in the file for deepseek2 (scale and length) and mistral3 (scale; its length is
// the YaRN original context), and the flags are refused by name for other architectures, for
// mistral3's length and for Hugging Face folders. A model written with the temperature against the
// same weights written without it: the reference's logits are bitwise equal before the first step
// (the temperature is 1 there) and differ after it, and the CPU matches the reference with it.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "e2e/process.h"
#include "fixtures.h"
#include "gguf/gguf.h"
#include "model/model_compare.h"

namespace pagoda::test {
namespace {

const std::vector<std::string> kDeepseek2 = {"--arch", "deepseek2", "--experts", "4", "--experts-used", "2", "--head-dim",
                                             "24", "--kv-lora-rank", "32", "--expert-ffn-dim", "32", "--layers", "2",
                                             "--ctx", "64", "--seed", "9"};
const std::vector<std::string> kMistral3 = {"--arch", "mistral3", "--layers", "2", "--ctx", "32", "--seed", "9"};

// gen-model -o `name`.gguf with `base` and `extra`; returns the path (the run must succeed).
std::string gen(const std::string& name, const std::vector<std::string>& base, const std::vector<std::string>& extra = {}) {
    const std::string path = temp_path("gen-temperature-" + name + ".gguf");
    std::vector<std::string> args = {"gen-model", "-o", path};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_pagoda(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
}

std::string refusal(const std::vector<std::string>& base, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"gen-model", "-o", temp_path("gen-temperature-refused")};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_pagoda(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    return r.err;
}

TEST(GenModelTemperature, FlagsWriteTheKeysTheArchitectureReads) {
    {
        auto f = gguf::File::open(gen("deepseek2", kDeepseek2, {"--attn-temperature-scale", "0.25", "--attn-temperature-length", "4"}));
        EXPECT_EQ(f->get_float("deepseek2.attention.temperature_scale"), 0.25);
        EXPECT_EQ(f->get_int("deepseek2.attention.temperature_length"), 4);
    }
    {  // the length defaults to the original context, a quarter of --ctx
        auto f = gguf::File::open(gen("deepseek2-default-length", kDeepseek2, {"--attn-temperature-scale", "0.25"}));
        EXPECT_EQ(f->get_int("deepseek2.attention.temperature_length"), 16);
    }
    {
        auto f = gguf::File::open(gen("deepseek2-plain", kDeepseek2));
        EXPECT_FALSE(f->has("deepseek2.attention.temperature_scale"));
        EXPECT_FALSE(f->has("deepseek2.attention.temperature_length"));
    }
    EXPECT_EQ(gguf::File::open(gen("mistral3-default", kMistral3))->get_float("mistral3.attention.temperature_scale"),
              double(0.1f));  // Ministral 3's converter's
    EXPECT_EQ(gguf::File::open(gen("mistral3-0.5", kMistral3, {"--attn-temperature-scale", "0.5"}))
                  ->get_float("mistral3.attention.temperature_scale"), 0.5);

    EXPECT_NE(refusal({"--arch", "llama"}, {"--attn-temperature-scale", "0.1"})
                  .find("--attn-temperature-scale / --attn-temperature-length are for --arch deepseek2 or mistral3 (the "
                        "architectures that read attention.temperature_scale), not llama"),
              std::string::npos);
    EXPECT_NE(refusal(kMistral3, {"--attn-temperature-scale", "0.1", "--attn-temperature-length", "8"})
                  .find("--attn-temperature-length is for --arch deepseek2 (mistral3's length is its "
                        "rope.scaling.original_context_length"),
              std::string::npos);
    EXPECT_NE(refusal(kDeepseek2, {"--attn-temperature-length", "8"}).find("--attn-temperature-length needs --attn-temperature-scale"),
              std::string::npos);
    EXPECT_NE(refusal(kDeepseek2, {"--attn-temperature-scale", "0.1", "--format", "hf"}).find("is written to GGUF only"),
              std::string::npos);
    EXPECT_NE(refusal(kDeepseek2, {"--attn-temperature-scale", "-1"}).find("--attn-temperature-scale"), std::string::npos);
}

// The reference's logits of prompt(19) on `with` and `without` (the same weights): bitwise equal below
// position `first_step`, apart by over 1e-3 of the largest logit somewhere after it.
void expect_temperature_from(const std::string& with, const std::string& without, size_t first_step) {
    const std::vector<int32_t> ids = model::model_compare::prompt(19);
    const auto a = model::model_compare::reference_logits(with, ids), b = model::model_compare::reference_logits(without, ids);
    ASSERT_EQ(a.size(), b.size());
    const size_t vocab = a.size() / ids.size();
    for (size_t i = 0; i < first_step * vocab; ++i) ASSERT_EQ(a[i], b[i]) << "position " << i / vocab;
    double moved = 0, scale = 0;
    for (size_t i = first_step * vocab; i < a.size(); ++i)
        moved = std::max(moved, double(std::abs(a[i] - b[i]))), scale = std::max(scale, double(std::abs(b[i])));
    EXPECT_GT(moved, 1e-3 * scale);
}

TEST(GenModelTemperature, AModelWithItDiffersFromOneWithoutAndTheCpuMatchesTheReference) {
    const std::string ds = gen("deepseek2-run", kDeepseek2, {"--attn-temperature-scale", "0.25", "--attn-temperature-length", "4"});
    expect_temperature_from(ds, gen("deepseek2-run-plain", kDeepseek2), 4);
    model::model_compare::expect_cpu_matches_reference(std::shared_ptr<const gguf::File>(gguf::File::open(ds)), true, 1e-5);
    // mistral3: --ctx 32 puts the steps at 8 and 16 (a quarter of it); scale 0 writes none.
    const std::string m3 = gen("mistral3-run", kMistral3, {"--attn-temperature-scale", "0.5"});
    expect_temperature_from(m3, gen("mistral3-run-plain", kMistral3, {"--attn-temperature-scale", "0"}), 8);
    model::model_compare::expect_cpu_matches_reference(std::shared_ptr<const gguf::File>(gguf::File::open(m3)), true, 1e-5);
}

}  // namespace
}  // namespace pagoda::test
