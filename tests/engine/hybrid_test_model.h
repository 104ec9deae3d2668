// A small random hybrid model for the engine tests (qwen35 / qwen35moe / qwen3next: 4 layers of dim
// 64, a 300-token vocabulary; the moe forms with 8 experts, 2 used; qwen3next's 4 value heads grouped
// 2 per key head), written to a temp file named by `tag`.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cpu/ops/recurrent.h"
#include "fixtures.h"
#include "model/random_model.h"

namespace pagoda::engine::test {

inline std::string hybrid_test_model(const std::string& arch, uint64_t seed, const std::string& tag) {
    model::RandomModelSpec spec;
    spec.arch = arch;
    spec.n_layers = 4; spec.dim = 64; spec.n_heads = 4; spec.n_kv_heads = 2; spec.head_dim = 16; spec.ffn_dim = 64;
    spec.vocab_size = 300; spec.seed = seed;
    if (arch == "qwen35moe" || arch == "qwen3next") spec.n_experts = 8, spec.n_experts_used = 2, spec.expert_ffn_dim = 32;
    const std::string f = pagoda::test::temp_path(tag + "-" + arch + ".gguf");
    model::write_random_model(spec, nullptr, f);
    return f;
}

// The CPU's delta rule token by token for a test's lifetime (the default, unless PAGODA_DELTA_RULE
// says otherwise): however the engine splits a prompt into steps (token budgets, preemption,
// snapshots) the states are then bitwise the same, so greedy tokens compare exactly. The chunked
// form agrees with it to float rounding only, which a random model's near-tied logits or expert
// scores can turn into other tokens (tests/model and tests/backend/cpu/delta_chunk_test.cpp check
// that agreement).
struct RecurrentDeltaRule {
    backend::cpu::DeltaRuleForm was = backend::cpu::delta_rule_form();
    RecurrentDeltaRule() { backend::cpu::set_delta_rule_form(backend::cpu::DeltaRuleForm::recurrent); }
    ~RecurrentDeltaRule() { backend::cpu::set_delta_rule_form(was); }
};

}  // namespace pagoda::engine::test
