// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): the qwen3 graph (per-head Q/K RMSNorm, NEOX RoPE) whose
// FFN is routed experts only, top-k weights renormalised (as llama.cpp).
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_qwen3moe(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.qk_norm = true});
}

}  // namespace pagoda::model
