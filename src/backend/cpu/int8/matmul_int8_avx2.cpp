// AVX2 kernel of the int8 method: weight blocks unpacked in registers from the GGUF bytes, multiplied
// with vpmaddubsw (unsigned codes x signed activation bytes into int16 pairs) and vpmaddwd (pairs into
// int32). No pair can saturate int16: unsigned codes are at most 63 (Q6_K) and Q8_0's signed codes go
// through the sign trick |w| x sign(q, w) (at most 128 * 127 * 2). Block loop: int8_fused.h.
#include <immintrin.h>

#include "core/error.h"
#include "backend/cpu/int8/int8_fused.h"
#include "backend/cpu/simd/avx2.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx2Dot {
    static constexpr int R1 = 2, R = 1, T = 2, signed_offset = 0;  // R1: rows per decode step
    template <bool Signed>
    static __m256i prepare_codes(__m256i u) { return u; }
    template <bool Signed>
    static __m256i dot(__m256i acc, __m256i u, __m256i q) {
        if constexpr (Signed) return simd::Avx2::dot_u8i8(acc, _mm256_abs_epi8(u), _mm256_sign_epi8(q, u));
        else return simd::Avx2::dot_u8i8(acc, u, q);
    }
};

}  // namespace

void matmul_int8_avx2(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                      const GemmTiles& tiles) {
    fused_matmul<Avx2Dot>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
