// gemma3 (text): the Gemma graph (gemma_family.h) with per-head Q/K RMSNorm and no soft caps; five
// sliding-window layers for every global one (layers 5, 11, ... are global) unless
// gemma3.attention.sliding_window_pattern says otherwise. Sliding layers rotate with their own base,
// gemma3.rope.freq_base_swa (default 10000, as llama.cpp assumes for older files) and without the
// linear scaling (gemma3.rope.scaling.*) that the global layers get.
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/arch/gemma_family.h"
#include "model/arch/sliding_window.h"

namespace pagoda::model {

BuiltModel build_gemma3(const gguf::File& file, const ModelConfig& c, backend::Backend& backend) {
    if (!file.has("gemma3.attention.sliding_window"))
        fail("{}: gemma3.attention.sliding_window is missing", file.name());
    GemmaVariant v;
    v.qk_norm = true;
    v.query_scale = gemma_query_scale(c, 62);
    v.windows = layer_windows(file, "gemma3", c.n_layers, file.get_int("gemma3.attention.sliding_window"), 6);
    v.local_rope_theta = float(file.get_float_or("gemma3.rope.freq_base_swa", 10000.0));
    if (!(v.local_rope_theta > 1)) fail("{}: gemma3.rope.freq_base_swa = {} is out of range", file.name(), v.local_rope_theta);
    v.local_rope_unscaled = true;
    v.image_input = true;
    return build_gemma_family(file, c, backend, v);
}

}  // namespace pagoda::model
