// gemma2: the Gemma graph (gemma_family.h) with attention-logit and final-logit soft caps and
// sliding-window layers alternating with global ones (layer 0 slides), as llama.cpp reads Gemma 2:
// gemma2.attention.sliding_window (default 4096), gemma2.attn_logit_softcapping,
// gemma2.final_logit_softcapping (absent: no cap).
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/gemma_family.h"
#include "model/arch/sliding_window.h"

#include "core/error.h"

namespace pagoda::model {

BuiltModel build_gemma2(const gguf::File& file, const ModelConfig& c, backend::Backend& backend) {
    GemmaVariant v;
    v.attn_softcap = float(file.get_float_or("gemma2.attn_logit_softcapping", 0.0));
    v.final_softcap = float(file.get_float_or("gemma2.final_logit_softcapping", 0.0));
    if (!(v.attn_softcap >= 0) || !(v.final_softcap >= 0))
        fail("{}: gemma2 soft caps must not be negative (attention {}, final {})", file.name(), v.attn_softcap, v.final_softcap);
    v.query_scale = gemma_query_scale(c, 46);
    v.windows = layer_windows(file, "gemma2", c.n_layers, file.get_int_or("gemma2.attention.sliding_window", 4096), 2);
    return build_gemma_family(file, c, backend, v);
}

}  // namespace pagoda::model
