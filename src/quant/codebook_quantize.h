// Quantisers to IQ4_NL, IQ4_XS and MXFP4 (layouts: codebook_blocks.h), importance-weighted.
// Each value's weight in the error is importance[i] * sqrt(sigma2 + x_i^2) with an importance vector
// (sigma2: twice the row's mean square), x_i^2 without one; the stored result minimises that
// weighted squared error over a search:
//   IQ4_NL: per 32 values, scales that map the largest-magnitude value onto either end of the table
//           (and 7 shifts either side), each refitted by weighted least squares on its nearest codes;
//           the best refit is stored as f16 and the codes re-picked against the stored scale.
//   IQ4_XS: the same search per 32-value sub-block; the super-block d (f16) maps the largest sub-block
//           scale onto -32, each sub-block keeps round(scale / d) in -32..31, codes re-picked.
//   MXFP4:  per 32 values the smallest exponent whose range covers max|x| and its two neighbours;
//           codes are the nearest E2M1 values, ties to the first in table order.
// Re-quantising dequantised values gives the same values back (the search contains the exact scale).
// n must be a multiple of the block size (32, IQ4_XS 256); importance has n entries or is null.
#pragma once
#include <cstdint>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

bool is_codebook_quantisable(gguf::GgmlType type);  // IQ4_NL, IQ4_XS, MXFP4
// Throws pagoda::Error naming the type for the other codebook types (no quantiser, by design: they
// need grid searches llama.cpp's quantiser does; files carrying them load and compute).
void quantize_row_codebook(gguf::GgmlType type, const float* x, const float* importance, void* out, int64_t n);

}  // namespace pagoda::quant
