// AVX-512 VNNI kernel of the int8 method: weight blocks unpacked in registers from the GGUF bytes and
// multiplied with vpdpbusd (unsigned codes x signed activation bytes, exact int32 sums of 4 products);
// Q8_0's signed codes are biased by +128 (flip of the sign bit) and the bias removed through corr.
// The block loop and the per-output order are in int8_fused.h.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "core/error.h"
#include "backend/cpu/int8/int8_fused.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct VnniDot {
    static constexpr int R1 = 4, R = 1, T = 4, signed_offset = 128;  // R1: rows per decode step
    template <bool Signed>
    static __m256i prepare_codes(__m256i u) {
        if constexpr (Signed) return _mm256_xor_si256(u, _mm256_set1_epi8(char(0x80)));
        else return u;
    }
    template <bool Signed>
    static __m256i dot(__m256i acc, __m256i u, __m256i q) { return _mm256_dpbusd_epi32(acc, u, q); }
};

}  // namespace

void matmul_int8_avx512(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                        const GemmTiles& tiles) {
    fused_matmul<VnniDot>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
