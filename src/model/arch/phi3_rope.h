// Phi-3's LongRoPE choice, separate from the graph so tests can check it: which factor tensor applies
// for the context a load runs at, and the attention factor.
#pragma once
#include <string>

#include "model/config.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

struct LongRope {
    std::string factors_tensor;  // rope_factors_long.weight / rope_factors_short.weight, "" for none
    double attn_factor = 1.0;    // multiplies the rotated q and k
    bool long_factors = false;
};

// Long factors when config.max_context (0: the trained context) exceeds
// phi3.rope.scaling.original_context_length, else short ones; files without the factor tensors get
// plain RoPE. attn_factor: phi3.rope.scaling.attn_factor when present, else
// sqrt(1 + ln(s) / ln(original)) with s = trained context / original when s > 1, else 1.
LongRope read_long_rope(const gguf::File& file, const ModelConfig& config);

}  // namespace pagoda::model
