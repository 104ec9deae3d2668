// minimax-m2 (llama.cpp's LLM_ARCH_MINIMAX_M2: MiniMax-M2, M2.1): the llama graph whose Q and K get an
// RMSNorm over the whole projected row (every head at once, weights n_heads x head_dim and
// n_kv_heads x head_dim) before the split into heads, NEOX RoPE over the leading
// rope.dimension_count dims of each head (partial rotary), no biases, and in every layer routed
// experts only: a sigmoid router whose selection adds the per-expert bias exp_probs_b (required, as
// llama.cpp loads it), top-k weights renormalised (the config's expert_weights_norm, true by default).
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_minimax_m2(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    // The shared MoE FFN loads the selection bias where the file has it; here every layer needs one.
    for (int64_t i = 0; i < config.n_layers; ++i)
        if (const std::string name = fmt::format("blk.{}.exp_probs_b.bias", i); !file.find_tensor(name))
            fail("{}: tensor {} is missing", file.name(), name);
    return build_llama_family(file, config, backend, {.qk_norm_whole_row = true});
}

}  // namespace pagoda::model
