// The random glm4moe / glm4 / smollm3 / mistral3 models the glm tests share (gen-model's writers with
// small shapes) and the reference backend's logits of a prompt: the oracle every comparison uses.
#pragma once
#include <string>
#include <vector>

#include "fixtures.h"
#include "model/open_step_model.h"
#include "model/random_model.h"
#include "model/sequence_runner.h"
#include "model_compare.h"

namespace pagoda::model::glm_test {

inline RandomModelSpec glm4moe_spec(uint64_t seed) {
    RandomModelSpec s;
    s.arch = "glm4moe";
    s.n_layers = 3; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = 32; s.ffn_dim = 96; s.vocab_size = 300;
    s.n_experts = 8; s.n_experts_used = 2; s.expert_ffn_dim = 32; s.n_shared_experts = 1; s.leading_dense = 1;
    s.expert_weights_scale = 2.5f; s.expert_weights_norm = true; s.qk_norm = true; s.seed = seed;
    return s;
}

inline RandomModelSpec dense_spec(const std::string& arch, uint64_t seed) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_layers = arch == "smollm3" ? 5 : 2; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.ffn_dim = 96; s.vocab_size = 300;
    s.head_dim = arch == "glm4" ? 32 : 0;
    s.seed = seed;
    return s;
}

using model_compare::prompt;
using model_compare::reference_logits;


}  // namespace pagoda::model::glm_test
