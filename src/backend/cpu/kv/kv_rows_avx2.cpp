// AVX2 + F16C KV row encoders (contract: kv_rows.h; loops: kv_rows_simd.h; traits: simd/avx2.h).
#include "backend/cpu/kv/kv_rows_simd.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::detail {

using simd::Avx2;

void f32_to_f16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_f16_row_t<Avx2>(x, n, out); }
void f32_to_bf16_row_avx2(const float* x, int64_t n, uint16_t* out) { f32_to_bf16_row_t<Avx2>(x, n, out); }
float quantize_row_q8_avx2(const float* x, int8_t* q, int64_t n) { return quantize_row_q8_t<Avx2>(x, q, n); }

}  // namespace pagoda::backend::cpu::detail
