// AVX-512 f32 path of matmul (F32/F16/BF16 weights and dequant_fma for block types): 16 lanes
// (simd/avx512.h), 4 rows x 6 tokens of zmm accumulators per micro-kernel step.
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/matmul/float_gemm.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Avx512Gemm : simd::Avx512 {
    static constexpr int R = 4, T = 6;
    // hsum of the 4 rows' vectors at once, each add the one hsum does (lane j of a row: v[j] + v[j+8],
    // then + the lane 4 on, then q0+q2 / q1+q3, then their sum); only the shuffles are shared.
    static void sum_rows(const V* v, float* out) {
        // Halves: [v0 lo 256 | v1 lo 256] + [v0 hi 256 | v1 hi 256], the same for rows 2 and 3.
        const __m512 h01 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xEE));
        const __m512 h23 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xEE));
        // Quarters: 128-bit chunk r now holds row r's four partial sums q0..q3.
        const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xDD));
        const __m512 p = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4E));       // q0+q2, q1+q3
        const __m512 s = _mm512_add_ps(p, _mm512_permute_ps(p, 0xB1));       // (q0+q2)+(q1+q3)
        const __m512i lane0_of_each_chunk = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0_of_each_chunk, s)));
    }
};

}  // namespace

void matmul_float_avx512(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                         const GemmTiles& tiles) {
    float_matmul<Avx512Gemm>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
