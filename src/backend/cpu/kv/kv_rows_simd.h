// Internal: the row loops of kv_rows.h written once over a traits type S (simd::Avx2 /
// simd::Avx512, instantiated in kv_rows_avx2.cpp, kv_rows_avx512.cpp): S::L values a step;
// S::any_nan(x) whether x[0..L) holds a NaN (those vectors take the scalar conversion, whose NaN
// the hardware's would not match); S::to_f16(x, out) and S::to_bf16(x, out) narrow L values with
// round to nearest even, NaN lanes as f32_to_bf16; for q8, S::V (f32 vector) with load, zero,
// abs_max(acc, x) (max of acc and |x|, and whether |x| is finite in every lane), hmax, and to_q8(x,
// scale, out) (L codes: x / scale rounded half to even, clamped to +-127). The tail goes through
// the scalar definition. Internal linkage: each ISA file gets its own copy.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/cpu/kv/kv_rows.h"
#include "kv/kv_q8.h"

namespace pagoda::backend::cpu::detail {
namespace {

template <class S>
void f32_to_f16_row_t(const float* x, int64_t n, uint16_t* out) {
    int64_t i = 0;
    for (; i + S::L <= n; i += S::L) {
        if (S::any_nan(x + i)) f32_to_f16_row_reference(x + i, S::L, out + i);
        else S::to_f16(x + i, out + i);
    }
    f32_to_f16_row_reference(x + i, n - i, out + i);
}

template <class S>
void f32_to_bf16_row_t(const float* x, int64_t n, uint16_t* out) {
    int64_t i = 0;
    for (; i + S::L <= n; i += S::L) S::to_bf16(x + i, out + i);
    f32_to_bf16_row_reference(x + i, n - i, out + i);
}

// kv::quantize_row_q8's arithmetic: the largest |x| (a max: the same whatever the order), scale =
// that / 127, then each code from its own correctly rounded division; rows with inf or NaN, or all
// zeros, take the scalar (their outputs are special cases there).
template <class S>
float quantize_row_q8_t(const float* x, int8_t* q, int64_t n) {
    typename S::V amax = S::zero();
    bool finite = true;
    int64_t i = 0;
    for (; i + S::L <= n; i += S::L) finite = S::abs_max(amax, S::load(x + i)) && finite;
    float m = S::hmax(amax);
    for (int64_t j = i; j < n; ++j) {
        const float a = std::fabs(x[j]);
        finite = finite && std::isfinite(a);
        m = std::fmax(m, a);
    }
    const float scale = m / 127.0f;
    if (!finite || scale == 0.0f) return kv::quantize_row_q8(x, q, n);
    for (i = 0; i + S::L <= n; i += S::L) S::to_q8(x + i, scale, q + i);
    kv::quantize_codes_q8(x + i, scale, q + i, n - i);
    return scale;
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
