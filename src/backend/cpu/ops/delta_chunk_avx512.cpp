// AVX-512 instantiation of the chunked gated delta rule (delta_chunk.h, delta_chunk_simd.h).
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/ops/delta_chunk_simd.h"

namespace pagoda::backend::cpu::detail {

void delta_chunk_avx512(const DeltaChunk& c) { delta_chunk_t<simd::Avx512>(c); }

}  // namespace pagoda::backend::cpu::detail
