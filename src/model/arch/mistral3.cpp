// mistral3 (llama.cpp's LLM_ARCH_MISTRAL3: Ministral 3 and the 2025 Mistral Small / Magistral text
// models the converter writes under this name): the llama graph (adjacent-pair RoPE; the converter is
// llama's) with YaRN frequencies ({arch}.rope.scaling.*) whose rotation llama.cpp leaves unscaled
// (its mistral3 graph divides YaRN's mscale back out, as transformers' attention factor is 1 for
// mscale = mscale_all_dim = 1). Only yarn_log_multiplier 0 or 1 is accepted: for others llama.cpp and
// transformers disagree. Llama-4-style attention temperature scaling ({arch}.attention.temperature_scale
// = beta) multiplies q by 1 + beta ln(1 + floor((pos + 1) / original_context)), which is exactly 1
// below position original_context - 1: pagoda does not implement the scaling, so such a model runs at
// most that many positions (a longer --ctx is refused naming it). Vision tensors (v.*, mm.*) in the
// file are skipped with a log line.
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
    if (beta != 0.0) {
        const int64_t floor = file.get_int_or(a + "rope.scaling.original_context_length", config.context_length);
        if (floor < 2) fail("{}: {}attention.temperature_scale needs rope.scaling.original_context_length > 1", file.name(), a);
        v.max_positions = floor - 1;
        v.max_positions_reason = fmt::format("positions before its attention temperature scaling ({}attention."
                                             "temperature_scale = {}) starts, which pagoda does not implement", a, beta);
        log_info("{}: attention temperature scaling is not implemented: running at most {} positions, where it is 1",
                 file.name(), v.max_positions);
    }
    return build_llama_family(file, config, backend, v);
}

}  // namespace pagoda::model
