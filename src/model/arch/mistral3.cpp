// mistral3 (llama.cpp's LLM_ARCH_MISTRAL3: Ministral 3 and the 2025 Mistral Small / Magistral text
// models the converter writes under this name): the llama graph (adjacent-pair RoPE; the converter is
// llama's) with YaRN frequencies ({arch}.rope.scaling.*) whose rotation llama.cpp leaves unscaled
// (its mistral3 graph divides YaRN's mscale back out, as transformers' attention factor is 1 for
// mscale = mscale_all_dim = 1). Only yarn_log_multiplier 0 or 1 is accepted: for others llama.cpp and
// transformers disagree. Llama-4-style attention temperature tuning ({arch}.attention.temperature_scale
// = beta, non-zero) multiplies each query row after RoPE by 1 + beta ln(1 + floor(pos / length)), the
// length being rope.scaling.original_context_length, else the context length (llama.cpp's mistral3
// reads n_ctx_orig_yarn, with no position offset; transformers' Ministral3 takes the same expression
// of the cache position): the attn_temperature op after each layer's K/V write. Vision tensors
// (v.*, mm.*) in the file are skipped with a log line.
#include <climits>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/llama_family.h"

namespace pagoda::model {

BuiltModel build_mistral3(const gguf::File& file, const ModelConfig& config, backend::Backend& backend) {
    const std::string a = config.arch + ".";
    const double log_mul = file.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0);
    if (log_mul != 0.0 && log_mul != 1.0)
        fail("{}: {}rope.scaling.yarn_log_multiplier = {} is not supported (only 0 or 1, the mscale_all_dim for "
             "which llama.cpp's mistral3 and transformers agree)", file.name(), a, log_mul);
    int64_t vision = 0;  // a multimodal conversion's vision tower and projector, if the file holds them
    for (const auto& t : file.tensors()) vision += t.name.rfind("v.", 0) == 0 || t.name.rfind("mm.", 0) == 0;
    if (vision > 0) log_info("{}: {} vision tensors (v.*, mm.*) skipped: the text model runs without them", file.name(), vision);
    LlamaVariant v{.yarn_unscaled = true};
    const double beta = file.get_float_or(a + "attention.temperature_scale", 0.0);
    if (!std::isfinite(beta)) fail("{}: {}attention.temperature_scale = {} is not a number", file.name(), a, beta);
    if (beta != 0.0) {
        // llama.cpp's n_ctx_orig_yarn: the key, else the training context
        const int64_t length = file.get_int_or(a + "rope.scaling.original_context_length", config.context_length);
        if (length < 1 || length > INT32_MAX)
            fail("{}: {}attention.temperature_scale needs a positive {}rope.scaling.original_context_length (its "
                 "length), got {}", file.name(), a, a, length);
        v.attn_temperature = {.beta = float(beta), .length = int32_t(length)};
    }
    return build_llama_family(file, config, backend, v);
}

}  // namespace pagoda::model
