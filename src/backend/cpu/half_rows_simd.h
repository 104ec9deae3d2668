// Internal: the row loops of half_rows.h written once over a traits type S (half_rows_avx2.cpp,
// half_rows_avx512.cpp): S::L values a step; S::any_nan(x) whether x[0..L) holds a NaN (those
// vectors take the scalar conversion, whose NaN the hardware's would not match); S::to_f16(x, out)
// and S::to_bf16(x, out) narrow L values with round to nearest even, NaN lanes as f32_to_bf16.
// The tail goes through the scalar conversion. Internal linkage: each ISA file gets its own copy.
#pragma once
#include <cstdint>

#include "backend/cpu/half_rows.h"

namespace pagoda::kernels::detail {
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

}  // namespace
}  // namespace pagoda::kernels::detail
