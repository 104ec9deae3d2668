// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): the qwen2 graph (Q/K/V biases, NEOX RoPE) whose FFN is
// routed experts plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x); the top-k weights
// are not renormalised unless {arch}.expert_weights_norm says so (as llama.cpp).
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_qwen2moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.qkv_bias = true, .shared_expert = true});
}

}  // namespace pagoda::model
