// Quantisation with scale calibration: instead of taking each block's or group's scale from its
// plain min/max, search a grid of clipping ranges and keep the one with the smallest reconstruction
// error, weighted per column by an importance vector (mean squared activation of that input column,
// gathered by running the model on calibration text — activation-aware, in the spirit of AWQ; all
// ones without calibration). The output is the standard block format, so any GGUF reader computes
// the same values. Types: Q8_0, Q4_0 and pagoda's int8 / int4-g32 / int4-g128 schemes; Q4_K, Q5_K,
// Q6_K, Q2_K and Q3_K use the reference quantiser's own scale search (their super-block scales are searched
// there), Q5_0 and Q5_1 the reference quantiser's plain min/max scales (no importance weighting);
// IQ4_NL, IQ4_XS and MXFP4 their own importance-weighted search (quant/codebook_quantize.h).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/ggml_types.h"
#include "quant/weight_schemes.h"

namespace pagoda::quant {

// What a weight tensor is quantised to: a GGML type, or one of pagoda's schemes (stored as Q8_0 / Q4_1).
struct QuantTarget {
    gguf::GgmlType type = gguf::GgmlType::Q8_0;
    bool scheme = false;
    WeightScheme weight_scheme = WeightScheme::int8_per_channel;

    gguf::GgmlType storage_type() const { return scheme ? scheme_storage_type(weight_scheme) : type; }
    int64_t row_multiple() const;  // the row length must be a multiple of this
    std::string name() const;
};

// `importance` has n entries (nullptr: uniform). Throws pagoda::Error when n is not a multiple of
// target.row_multiple().
void quantize_row_calibrated(const QuantTarget& target, const float* x, const float* importance, void* out,
                             int64_t n);

// Whether the target's default quantiser searches clipped scales that QuantizeRequest::plain (the
// CLI's --plain-minmax) replaces by plain min/max ones: q8_0, q4_0 and the int schemes. The other
// types' quantisers search their own scales as ggml's do, so `plain` would change nothing.
bool has_clipping_search(const QuantTarget& target);

// Importance-weighted relative RMS error of a quantised row against the original.
double weighted_relative_error(const float* original, const float* reconstructed, const float* importance, int64_t n);

}  // namespace pagoda::quant
