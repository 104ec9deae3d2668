// The LoRA row kernels (lora_kernels.h) on AVX-512, 16 lanes: lora_rows_simd.h over simd::Avx512,
// with 4 rank rows side by side for one row, else 2 (2 x J x R accumulators + R x + J A: at most 22
// of 32 registers), and up from B reduced by sums16 below.
#include "backend/cpu/simd/avx512.h"
#include "backend/cpu/lora/lora_rows_simd.h"

namespace pagoda::backend::cpu {
namespace {

struct LoraAvx512 : simd::Avx512 {
    static constexpr int down_rank_rows(int rows) { return rows == 1 ? 4 : 2; }
    // Lane i of the result: the sum of v[i]'s 16 values, always by the same tree: lanes 2 apart
    // within each 128-bit quarter, then 1 apart, then the quarters 2 apart, then 1 apart (not
    // lanes16's order; the up-from-B pass has summed in this order since it was written).
    static V sum_each(const V (&v)[16]) {
        __m512 u[8], w[4];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
            u[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)  // per lane: the lane's sums of v[4i .. 4i+3]
            w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
        const __m512 x0 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
        const __m512 x1 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], 0x88), _mm512_shuffle_f32x4(w[2], w[3], 0xDD));
        return _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(x0, x1, 0xDD));
    }
};

}  // namespace

void lora_down_avx512(const LoraDown& d) { lora_simd::down_any<LoraAvx512>(d); }
void lora_up_avx512(const LoraUp& u) { lora_simd::up_any<LoraAvx512>(u); }

}  // namespace pagoda::backend::cpu
