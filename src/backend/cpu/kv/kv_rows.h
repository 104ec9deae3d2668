// The KV cache's row encoders: one row of f32 narrowed to f16 or bf16, or quantised to the q8 row
// format (a decode step stores one K and one V row per KV head and layer; element by element
// through the scalar definitions they cost more than the rest of the step's KV traffic). Every path
// gives exactly the scalar definition's bits, so a cache written on one host type reads back the
// same on another:
//   f16 / bf16: core/half.h's f32_to_f16 / f32_to_bf16 of each element (round to nearest even; a
//     NaN becomes the quiet NaN those return). AVX2 (F16C) and AVX-512 convert 8 / 16 values an
//     instruction and hand any vector holding a NaN to the scalar (the hardware keeps payloads).
//   q8: kv/kv_q8.h's quantize_row_q8 (the same max, the same correctly rounded divisions, round
//     half to even, the same clamp); a row holding inf or NaN, or all zeros, takes the scalar.
#pragma once
#include <cstdint>

namespace pagoda::backend::cpu {

void f32_to_f16_row(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row(const float* x, int64_t n, uint16_t* out);
// Writes q[0..n) and returns the row's scale, as kv::quantize_row_q8 (the reference).
float quantize_row_q8(const float* x, int8_t* q, int64_t n);

void f32_to_f16_row_reference(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_reference(const float* x, int64_t n, uint16_t* out);

namespace detail {  // per-ISA versions: call only where pagoda::active_isa() allows them
void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out);
float quantize_row_q8_avx2(const float* x, int8_t* q, int64_t n);
void f32_to_f16_row_avx512(const float* x, int64_t n, uint16_t* out);
void f32_to_bf16_row_avx512(const float* x, int64_t n, uint16_t* out);
float quantize_row_q8_avx512(const float* x, int8_t* q, int64_t n);
}  // namespace detail

}  // namespace pagoda::backend::cpu
