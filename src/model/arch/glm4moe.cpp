// glm4moe (llama.cpp's LLM_ARCH_GLM4_MOE: GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7): the llama graph with
// Q/K/V biases, optional per-head Q/K RMSNorms (present in GLM-4.5, absent in Air), NEOX RoPE over
// the leading rope.dimension_count dims of each head (half of it: partial rotary), the FFN's input
// norm stored as blk.N.post_attention_norm, the first leading_dense_block_count layers with a dense
// SwiGLU FFN and the rest with a sigmoid router (score-correction bias exp_probs_b, top-k
// renormalisation and routed scale from the config) plus ungated shared experts. Trailing NextN
// blocks (nextn_predict_layers) are stored and not run (read_config drops them, with a log line).
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_glm4moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend,
                              {.shared_expert = config.n_shared_experts > 0, .shared_gate = false,
                               .optional_qkv_bias = true, .optional_qk_norm = true, .ffn_norm = "post_attention_norm"});
}

}  // namespace pagoda::model
