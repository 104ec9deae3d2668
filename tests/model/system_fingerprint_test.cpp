// system_fingerprint: a stable id of build + model + backend + threads + ISA + kernel plan + KV type;
// any part changed changes it; a backend not known to be batch-invariant is marked "_nd"; and the
// parts of a real opened model are what they say (its model key, its backend, the methods in use).
#include "model/system_fingerprint.h"

#include <gtest/gtest.h>
#include <regex>
#include <set>

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/ops/recurrent.h"
#include "backend/cpu/matmul_test_util.h"
#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"

namespace pagoda::model {
namespace {

FingerprintParts sample_parts() {
    return {.build = 11, .model = 22, .backend = "cpu", .threads = 4, .isa = "avx2", .kernel_plan = "plan", .kv_dtype = "f16"};
}

TEST(SystemFingerprint, StableAndChangedByEveryPart) {
    const std::string base = system_fingerprint(sample_parts());
    EXPECT_TRUE(std::regex_match(base, std::regex("fp_[0-9a-f]{16}"))) << base;
    EXPECT_EQ(system_fingerprint(sample_parts()), base);
    std::vector<FingerprintParts> changed(7, sample_parts());
    changed[0].build = 12;
    changed[1].model = 23;
    changed[2].backend = "reference";
    changed[3].threads = 5;
    changed[4].isa = "avx512";
    changed[5].kernel_plan = "plan2";
    changed[6].kv_dtype = "q8";
    std::set<std::string> seen = {base};
    for (const auto& p : changed) EXPECT_TRUE(seen.insert(system_fingerprint(p)).second) << "a part changed nothing";
    // Strings are length-delimited: moving a character from one part to the next is another id.
    FingerprintParts a = sample_parts(), b = sample_parts();
    a.isa = "ab", a.kernel_plan = "c";
    b.isa = "a", b.kernel_plan = "bc";
    EXPECT_NE(system_fingerprint(a), system_fingerprint(b));
}

TEST(SystemFingerprint, BackendsWithoutTheBatchInvariancePromiseAreMarked) {
    EXPECT_TRUE(backend_is_batch_invariant("cpu"));
    EXPECT_TRUE(backend_is_batch_invariant("reference"));
    FingerprintParts p = sample_parts();
    p.backend = "some-gpu";
    EXPECT_FALSE(backend_is_batch_invariant(p.backend));
    EXPECT_TRUE(std::regex_match(system_fingerprint(p), std::regex("fp_[0-9a-f]{16}_nd")));
}

TEST(SystemFingerprint, PartsOfAnOpenedModel) {
    RandomModelSpec spec;
    spec.vocab_size = 300;
    const std::string path = pagoda::test::temp_path("fingerprint.gguf");
    write_random_model(spec, nullptr, path);
    auto m = open_step_model(path, {.threads = 1, .tokens_wanted = 256});
    const FingerprintParts p = fingerprint_parts(m->info());
    EXPECT_NE(p.build, 0u) << "the executable was read";
    EXPECT_EQ(p.model, m->info().model_key);
    EXPECT_EQ(p.backend, "cpu");
    EXPECT_EQ(p.threads, 1);
    EXPECT_NE(p.kernel_plan.find("f32 "), std::string::npos) << p.kernel_plan;
    // The float method in use is part of it (PAGODA_FLOAT_METHOD changes results, not the plan's name).
    backend::cpu::testing::KernelConfigGuard guard;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::f32_fma);
    const std::string fma = fingerprint_parts(m->info()).kernel_plan;
    backend::cpu::set_float_method(backend::cpu::FloatMethod::bf16_dot);
    EXPECT_NE(fingerprint_parts(m->info()).kernel_plan, fma);
}

// A model with recurrent layers under the chunked delta rule (PAGODA_DELTA_RULE=chunked) gives
// results that depend on how its prompts are split into steps: the plan names it and the
// fingerprint is marked "_nd"; the default (token by token) keeps the promise.
TEST(SystemFingerprint, AChunkedDeltaRuleLosesThePromise) {
    RandomModelSpec spec;
    spec.arch = "qwen35";
    spec.n_layers = 4; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.head_dim = 16; spec.ffn_dim = 96;
    spec.vocab_size = 300;
    const std::string path = pagoda::test::temp_path("fingerprint_qwen35.gguf");
    write_random_model(spec, nullptr, path);
    auto m = open_step_model(path, {.threads = 1, .tokens_wanted = 64, .state_slots = 2});
    struct Restore {
        backend::cpu::DeltaRuleForm was = backend::cpu::delta_rule_form();
        ~Restore() { backend::cpu::set_delta_rule_form(was); }
    } restore;
    backend::cpu::set_delta_rule_form(backend::cpu::DeltaRuleForm::recurrent);
    const FingerprintParts plain = fingerprint_parts(m->info());
    EXPECT_TRUE(plain.split_invariant);
    EXPECT_TRUE(std::regex_match(system_fingerprint(plain), std::regex("fp_[0-9a-f]{16}")));
    backend::cpu::set_delta_rule_form(backend::cpu::DeltaRuleForm::chunked);
    const FingerprintParts chunked = fingerprint_parts(m->info());
    EXPECT_FALSE(chunked.split_invariant);
    EXPECT_NE(chunked.kernel_plan.find("delta rule chunked"), std::string::npos) << chunked.kernel_plan;
    EXPECT_TRUE(std::regex_match(system_fingerprint(chunked), std::regex("fp_[0-9a-f]{16}_nd")));
}

}  // namespace
}  // namespace pagoda::model
