// smollm3 (llama.cpp's LLM_ARCH_SMOLLM3: SmolLM3-3B): the llama graph (adjacent-pair RoPE; the converter
// is llama's, Q/K rows permuted) in which every 4th layer (i + 1 divisible by 4) skips RoPE ("NoPE").
// The period is fixed in llama.cpp (n_no_rope_layer_step = 4), not a metadata key; HF configs state it
// as no_rope_layers, which hf_config checks against this period.
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_smollm3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    return build_llama_family(file, config, backend, {.no_rope_period = 4});
}

}  // namespace pagoda::model
