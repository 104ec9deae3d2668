// The scalar row encoders (the contract) and the run-time dispatch.
#include "backend/cpu/kv/kv_rows.h"

#include "core/cpu_features.h"
#include "core/half.h"
#include "kv/kv_q8.h"

namespace pagoda::backend::cpu {

void f32_to_f16_row_reference(const float* x, int64_t n, uint16_t* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

void f32_to_bf16_row_reference(const float* x, int64_t n, uint16_t* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

void f32_to_f16_row(const float* x, int64_t n, uint16_t* out) {
    switch (active_isa()) {
        case Isa::avx512: return detail::f32_to_f16_row_avx512(x, n, out);
        case Isa::avx2: return detail::f32_to_f16_row_avx2(x, n, out);
        case Isa::scalar: break;
    }
    f32_to_f16_row_reference(x, n, out);
}

void f32_to_bf16_row(const float* x, int64_t n, uint16_t* out) {
    switch (active_isa()) {
        case Isa::avx512: return detail::f32_to_bf16_row_avx512(x, n, out);
        case Isa::avx2: return detail::f32_to_bf16_row_avx2(x, n, out);
        case Isa::scalar: break;
    }
    f32_to_bf16_row_reference(x, n, out);
}

float quantize_row_q8(const float* x, int8_t* q, int64_t n) {
    switch (active_isa()) {
        case Isa::avx512: return detail::quantize_row_q8_avx512(x, q, n);
        case Isa::avx2: return detail::quantize_row_q8_avx2(x, q, n);
        case Isa::scalar: break;
    }
    return kv::quantize_row_q8(x, q, n);
}

}  // namespace pagoda::backend::cpu
