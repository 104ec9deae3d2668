// Portable kernel of the int8 method: exact integer sums per 16-value half, then per output one f32
// accumulator over blocks in order and one over the per-half offset terms.
#include "backend/cpu/int8/int8_gemm.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct ScalarKernel {
    static constexpr int R = 1, T = 1;

    template <int TT>
    static void compute(const uint8_t* const* u, const float* const* sw, const float* const* mh,
                        const QuantizedActivations& a, int64_t t0, float* out) {
        const int64_t nb = a.n_blocks, K = a.cols;
        const int8_t* q = a.q.data() + t0 * K;
        const float* d = a.d.data() + t0 * nb;
        const float* s = a.s.data() + t0 * 2 * nb;
        float acc = 0, macc = 0;
        for (int64_t b = 0; b < nb; ++b) {
            int32_t isum[2] = {0, 0};
            for (int i = 0; i < 32; ++i) isum[i / 16] += int32_t(u[0][b * 32 + i]) * int32_t(q[b * 32 + i]);
            acc += (float(isum[0]) * sw[0][2 * b] + float(isum[1]) * sw[0][2 * b + 1]) * d[b];
        }
        for (int64_t h = 0; h < 2 * nb; ++h) macc += mh[0][h] * s[h];
        out[0] = acc + macc;
    }
};

}  // namespace

void matmul_int8_scalar(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                        const GemmTiles& tiles) {
    int8_matmul<ScalarKernel>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
