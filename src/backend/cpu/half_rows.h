// Rows of f32 narrowed to f16 or bf16: the KV cache's stores (a decode step writes one K and one V
// row per KV head and layer; written element by element through core/half.h they cost more than
// the rest of the step's KV traffic). Every path gives exactly core/half.h's f32_to_f16 /
// f32_to_bf16 of each element (round to nearest even; a NaN becomes the quiet NaN those return),
// so a cache written on one host type reads back the same bits on another. The AVX2 (F16C) and
// AVX-512 versions convert 8 / 16 values an instruction and hand any vector holding a NaN to the
// scalar conversion (the hardware would keep its payload).
#pragma once
#include <cstdint>

namespace pagoda::kernels {

void f32_to_f16_row(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row(const float* x, int64_t n, uint16_t* out);

void f32_to_f16_row_reference(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_reference(const float* x, int64_t n, uint16_t* out);

namespace detail {  // per-ISA versions: call only where pagoda::active_isa() allows them
void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out);
void f32_to_f16_row_avx512(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_avx512(const float* x, int64_t n, uint16_t* out);
}  // namespace detail

}  // namespace pagoda::kernels
