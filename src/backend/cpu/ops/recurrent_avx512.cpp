// AVX-512 instantiations of the recurrent kernels (recurrent_paths.h): the causal conv
// (conv1d_simd.h) and the chunked gated delta rule (delta_chunk.h, delta_chunk_simd.h).
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/ops/conv1d_simd.h"
#include "backend/cpu/ops/delta_chunk_simd.h"
#include "backend/cpu/ops/recurrent_paths.h"

namespace pagoda::backend::cpu::detail {

void delta_chunk_avx512(const DeltaChunk& c) { delta_chunk_t<simd::Avx512>(c); }

void causal_conv1d_avx512(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                      float* state, float* out, int64_t channel_begin, int64_t channel_end) {
    causal_conv1d_t<simd::Avx512>(op, weight, x, rows, channels, state, out, channel_begin, channel_end);
}

}  // namespace pagoda::backend::cpu::detail
