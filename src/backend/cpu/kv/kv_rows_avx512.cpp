// AVX-512 KV row encoders (contract: kv_rows.h; loops: kv_rows_simd.h; traits: simd/avx512.h, AVX-512 F
// only: AVX512_BF16's conversion is not specified to match f32_to_bf16 on every input).
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/kv/kv_rows_simd.h"

namespace pagoda::backend::cpu::detail {

using simd::Avx512;

void f32_to_f16_row_avx512(const float* x, int64_t n, uint16_t* out) { f32_to_f16_row_t<Avx512>(x, n, out); }
void f32_to_bf16_row_avx512(const float* x, int64_t n, uint16_t* out) { f32_to_bf16_row_t<Avx512>(x, n, out); }
float quantize_row_q8_avx512(const float* x, int8_t* q, int64_t n) { return quantize_row_q8_t<Avx512>(x, q, n); }

}  // namespace pagoda::backend::cpu::detail
