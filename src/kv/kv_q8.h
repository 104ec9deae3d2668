// The q8 KV row format's arithmetic (see kv_layout.h for where a row's scale is stored): one row of
// n floats becomes n int8 values and one fp32 scale, symmetric, scale = max|x| / 127 and
// q = round-to-nearest(x / scale) (ties to even), so |x - q * scale| <= scale / 2 for every element.
// An all-zero row gets scale 0 and zeros; a row with inf or NaN gets scale NaN (reads back as NaN). The CPU backend stores and reads rows with these; the
// reference backend has its own independent version.
#pragma once
#include <cstdint>

namespace pagoda::kv {

// Writes q[0..n) and returns the row's scale.
float quantize_row_q8(const float* x, int8_t* q, int64_t n);
// The codes of a row whose scale is known (finite, > 0): q[i] = x[i] / scale rounded half to even,
// clamped to +-127 — quantize_row_q8's second half, also the SIMD encoders' tail.
void quantize_codes_q8(const float* x, float scale, int8_t* q, int64_t n);
// out[i] = q[i] * scale.
void dequantize_row_q8(const int8_t* q, float scale, float* out, int64_t n);

}  // namespace pagoda::kv
