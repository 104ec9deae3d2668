// RoPE frequency tables for the architecture builders: the plain base^(-2i/d) ladder, linear
// position interpolation, and per-frequency divisors (llama 3's rope_freqs.weight, Phi-3's LongRoPE
// factors). Also Llama 3.1's frequency smoothing, computed the way its published formula states, for
// files that carry the parameters (llama.rope.scaling.type = "llama3") instead of rope_freqs.weight.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda::gguf {
class File;
}

namespace pagoda::model {

// inv_freq[i] = theta^(-2i/dims) / factors[i] / linear_scale, i < dims/2 (factors empty: all 1).
backend::RopeSpec make_rope_spec(int64_t dims, bool neox, double theta, double linear_scale,
                                 const std::vector<float>& factors);

struct Llama3RopeScaling {
    double factor = 8.0;              // llama.rope.scaling.factor
    double low_freq_factor = 1.0;     // llama.rope.scaling.low_freq_factor
    double high_freq_factor = 4.0;    // llama.rope.scaling.high_freq_factor
    int64_t original_context = 8192;  // llama.rope.scaling.original_context_length
};

// The divisor of each frequency theta^(-2i/dims) under Llama 3.1 scaling: with wavelength
// w = 2 pi / f, 1 where w < original / high_freq_factor, `factor` where w > original / low_freq_factor,
// and between them 1 / ((1 - s) / factor + s) with s = (original / w - low) / (high - low).
std::vector<float> llama3_rope_factors(const Llama3RopeScaling& s, double theta, int64_t dims);

// The `{arch}.rope.scaling.*` keys of a "llama3" file; throws naming a key that is out of range.
Llama3RopeScaling read_llama3_rope_scaling(const gguf::File& file, const std::string& arch);

}  // namespace pagoda::model
