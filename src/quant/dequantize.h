// Reference dequantisation of GGML block formats (see block_formats.h): plain scalar code written from
// the format definitions. Every optimised kernel is tested against these. `n` must be a multiple of the
// type's block size (the GGUF reader guarantees it for tensors; callers check it for other inputs).
#pragma once
#include <cstdint>

#include "gguf/ggml_types.h"

namespace pagoda::quant {

void dequantize_row_q8_0(const void* blocks, float* out, int64_t n);
void dequantize_row_q4_0(const void* blocks, float* out, int64_t n);
void dequantize_row_q4_1(const void* blocks, float* out, int64_t n);
void dequantize_row_q5_0(const void* blocks, float* out, int64_t n);
void dequantize_row_q5_1(const void* blocks, float* out, int64_t n);
void dequantize_row_q2_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q3_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q4_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q5_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q6_K(const void* blocks, float* out, int64_t n);

// True for the block types above and the codebook types (IQ*, MXFP4; quant/codebook_blocks.h).
bool is_supported_block_type(gguf::GgmlType type);
// Dispatches on type; throws pagoda::Error for other types or when n is not a multiple of the block.
void dequantize_row(gguf::GgmlType type, const void* blocks, float* out, int64_t n);

}  // namespace pagoda::quant
