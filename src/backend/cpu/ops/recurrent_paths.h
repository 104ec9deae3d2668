// Internal: the per-ISA versions of the recurrent kernels (recurrent_avx512.cpp, recurrent_avx2.cpp,
// recurrent_scalar.cpp: conv1d_simd.h's causal conv and delta_chunk_simd.h's chunk of the delta
// rule, each written once over a traits type); call only where active_isa() allows the ISA.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/ops/delta_chunk.h"

namespace pagoda::backend::cpu::detail {

#define PAGODA_RECURRENT_DECLARE(suffix)                                                                     \
    void delta_chunk_##suffix(const DeltaChunk& c);                                                          \
    void causal_conv1d_##suffix(const CausalConv1d& op, const float* weight, const float* x, int64_t rows,    \
                                int64_t channels, float* state, float* out, int64_t channel_begin,           \
                                int64_t channel_end);

PAGODA_RECURRENT_DECLARE(avx512)
PAGODA_RECURRENT_DECLARE(avx2)
PAGODA_RECURRENT_DECLARE(scalar)
#undef PAGODA_RECURRENT_DECLARE

}  // namespace pagoda::backend::cpu::detail
