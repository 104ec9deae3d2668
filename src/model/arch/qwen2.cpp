// qwen2 (Qwen2, Qwen2.5): the llama graph with biases on the Q, K and V projections and NEOX-paired
// RoPE (ModelConfig::rope_style, read from the architecture).
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_qwen2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.qkv_bias = true});
}

}  // namespace pagoda::model
