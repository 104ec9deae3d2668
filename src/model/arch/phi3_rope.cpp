#include "model/arch/phi3_rope.h"

#include <cmath>

#include "core/error.h"
#include "gguf/gguf.h"

namespace pagoda::model {

LongRope read_long_rope(const gguf::File& f, const ModelConfig& c) {
    LongRope r;
    const bool has_long = f.find_tensor("rope_factors_long.weight") != nullptr;
    const bool has_short = f.find_tensor("rope_factors_short.weight") != nullptr;
    if (has_long != has_short)
        fail("{}: tensor {} is missing (LongRoPE needs both factor tensors)", f.name(),
             has_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    const std::string key = "phi3.rope.scaling.original_context_length";
    const int64_t original = f.get_int_or(key, c.context_length);
    if (original <= 0) fail("{}: {} = {} must be positive", f.name(), key, original);
    const int64_t run = c.max_context > 0 ? c.max_context : c.context_length;
    if (has_long) {
        r.long_factors = run > original;
        r.factors_tensor = r.long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight";
    }
    if (f.has("phi3.rope.scaling.attn_factor")) {
        r.attn_factor = f.get_float("phi3.rope.scaling.attn_factor");
        if (!(r.attn_factor > 0) || !std::isfinite(r.attn_factor))
            fail("{}: phi3.rope.scaling.attn_factor = {} must be positive", f.name(), r.attn_factor);
    } else if (has_long && c.context_length > original && original > 1) {
        const double s = double(c.context_length) / double(original);
        r.attn_factor = std::sqrt(1 + std::log(s) / std::log(double(original)));
    }
    return r;
}

}  // namespace pagoda::model
