// AVX2 instantiation of the chunked gated delta rule (delta_chunk.h, delta_chunk_simd.h).
#include "backend/cpu/simd/avx2.h"
#include "backend/cpu/ops/delta_chunk_simd.h"

namespace pagoda::backend::cpu::detail {

void delta_chunk_avx2(const DeltaChunk& c) { delta_chunk_t<simd::Avx2>(c); }

}  // namespace pagoda::backend::cpu::detail
