// qwen3 (dense Qwen3): the llama graph without Q/K/V biases, with an RMSNorm of every Q and K head
// (blk.N.attn_q_norm / attn_k_norm, one [head_dim] weight shared by the heads) before NEOX RoPE.
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_qwen3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.qk_norm = true});
}

}  // namespace pagoda::model
