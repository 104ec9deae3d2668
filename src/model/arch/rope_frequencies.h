// RoPE frequency tables for the architecture builders: the plain base^(-2i/d) ladder, linear
// position interpolation, and per-frequency divisors (llama 3's rope_freqs.weight, Phi-3's LongRoPE
// factors). Also Llama 3.1's frequency smoothing, computed the way its published formula states, for
// files that carry the parameters (llama.rope.scaling.type = "llama3") instead of rope_freqs.weight;
// and YaRN (gpt-oss), as ggml computes it.
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

// YaRN ("NTK-by-parts" interpolation with an attention temperature), ggml's form (rope_yarn and
// ggml_rope_yarn_corr_dims): pair i's angle is a blend of the interpolated theta_i / factor and the
// extrapolated theta_i, mix = ramp(i) * ext_factor, ramp(i) = 1 - clamp((i - low) / max(0.001,
// high - low), 0, 1), where low = max(0, floor(c(beta_fast))), high = min(dims - 1, ceil(c(beta_slow))),
// c(b) = dims * ln(original / (2 pi b)) / (2 ln theta). With ext_factor != 0 the rotated q and k are
// also scaled by mscale = attn_factor * (1 + 0.1 ln factor) (yarn_mscale), which a builder folds
// into the attention scale as mscale^2 (the scores are bilinear in q and k).
struct YarnRopeScaling {
    double factor = 1.0;            // {arch}.rope.scaling.factor (>= 1)
    int64_t original_context = 0;   // {arch}.rope.scaling.original_context_length
    double beta_fast = 32.0;        // {arch}.rope.scaling.yarn_beta_fast
    double beta_slow = 1.0;         // {arch}.rope.scaling.yarn_beta_slow
    double ext_factor = 1.0;        // {arch}.rope.scaling.yarn_ext_factor (llama.cpp: 1 for a YaRN model)
    double attn_factor = 1.0;       // {arch}.rope.scaling.attn_factor
};
// inv_freq[i] = theta^(-2i/dims) * ((1 - mix_i) / factor + mix_i).
backend::RopeSpec yarn_rope_spec(int64_t dims, bool neox, double theta, const YarnRopeScaling& y);
double yarn_mscale(const YarnRopeScaling& y);
// The `{arch}.rope.scaling.*` keys of a "yarn" file (original context: context_length when absent, as
// llama.cpp's n_ctx_orig_yarn). Throws naming a key out of range, or one pagoda does not compute yet
// (yarn_log_multiplier, DeepSeek's mscale split).
// deepseek2 passes log_multiplier_read: it reads yarn_log_multiplier itself (ModelConfig).
YarnRopeScaling read_yarn_rope_scaling(const gguf::File& file, const std::string& arch, int64_t context_length,
                                       bool log_multiplier_read = false);

}  // namespace pagoda::model
