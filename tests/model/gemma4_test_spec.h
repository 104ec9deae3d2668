// The random Gemma 4 models the gemma4 tests share (gen-model specs).
#pragma once
#include "model/random_model.h"

namespace pagoda::model::gemma4_test {

// Six layers: sliding, sliding, full, sliding, sliding, full (window 5); the last two share the KV of
// layers 3 (sliding) and 2 (full); full layers have no attn_v. As the 31B, sliding and full layers
// differ in head size (16 / 32) and KV heads (2 / 1) unless `uniform`.
inline RandomModelSpec gemma4_spec(uint64_t seed, int64_t shared_kv = 2, bool v_equals_k = true, bool uniform = false,
                            int64_t experts = 0) {
    RandomModelSpec s;
    s.arch = "gemma4";
    s.n_layers = 6; s.dim = 64; s.n_heads = 4; s.n_kv_heads = 2; s.head_dim = uniform ? 32 : 16; s.ffn_dim = 96; s.vocab_size = 300;
    s.full_head_dim = 32; s.full_kv_heads = uniform ? 2 : 1;
    s.sliding_window = 5; s.swa_period = 3; s.shared_kv_layers = shared_kv; s.v_equals_k = v_equals_k;
    s.final_softcap = 30.0f; s.seed = seed;
    s.n_experts = experts; s.n_experts_used = 2; s.expert_ffn_dim = 48;
    return s;
}

// The 26B-A4B's form: every layer runs 6 experts (top 2, 48 wide) beside its dense FFN.
inline RandomModelSpec gemma4_moe_spec(uint64_t seed) { return gemma4_spec(seed, 2, true, false, 6); }

// The E2B/E4B's form: per-layer embeddings of 32 values a layer, the two KV-sharing layers' FFN
// twice as wide (feed_forward_length one width per layer).
inline RandomModelSpec gemma4_ple_spec(uint64_t seed) {
    RandomModelSpec s = gemma4_spec(seed);
    s.per_layer_embd = 32;
    return s;
}

}  // namespace pagoda::model::gemma4_test
