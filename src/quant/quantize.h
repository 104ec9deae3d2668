// Reference quantisation to GGML block formats, bit-compatible with ggml's reference quantisers
// (quantize_row_*_ref): the same rounding, the same search for K-quant scales, f16 stored with
// round-to-nearest-even, and no fused multiply-add (this file is compiled for baseline x86-64), so
// other GGUF readers dequantise our files to the values we computed. `n` must be a multiple of the
// block size; `out` receives n / block_size blocks.
#pragma once
#include <cstdint>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

void quantize_row_q8_0(const float* x, void* out, int64_t n);
void quantize_row_q4_0(const float* x, void* out, int64_t n);
void quantize_row_q4_1(const float* x, void* out, int64_t n);
void quantize_row_q5_0(const float* x, void* out, int64_t n);
void quantize_row_q5_1(const float* x, void* out, int64_t n);
void quantize_row_q2_K(const float* x, void* out, int64_t n);
void quantize_row_q3_K(const float* x, void* out, int64_t n);
void quantize_row_q4_K(const float* x, void* out, int64_t n);
void quantize_row_q5_K(const float* x, void* out, int64_t n);
void quantize_row_q6_K(const float* x, void* out, int64_t n);

// Also IQ4_NL, IQ4_XS and MXFP4 (quant/codebook_quantize.h, uniform importance).
bool can_quantize(gguf::GgmlType type);
// Throws pagoda::Error for a type without a quantiser or n not a multiple of its block size.
void quantize_row(gguf::GgmlType type, const float* x, void* out, int64_t n);

}  // namespace pagoda::quant
