// Portable f32 path of matmul: the same blocked algorithm over 8 emulated lanes, with separate
// multiply and add (baseline x86-64 has no FMA), so it runs on any CPU.
#include "core/half.h"
#include "backend/cpu/matmul/float_gemm.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Scalar {
    struct V { float v[8]; };
    static constexpr int L = 8, R = 4, T = 2;
    static V zero() { return V{}; }
    static V load(const float* p) { V r; for (int i = 0; i < 8; ++i) r.v[i] = p[i]; return r; }
    static V fma(V a, V b, V c) {
        for (int i = 0; i < 8; ++i) c.v[i] += a.v[i] * b.v[i];
        return c;
    }
    static V load_f16(const uint16_t* p) { V r; for (int i = 0; i < 8; ++i) r.v[i] = f16_to_f32(p[i]); return r; }
    static V load_bf16(const uint16_t* p) { V r; for (int i = 0; i < 8; ++i) r.v[i] = bf16_to_f32(p[i]); return r; }
    static float hsum(V v) {
        float q[4];
        for (int i = 0; i < 4; ++i) q[i] = v.v[i] + v.v[i + 4];
        float a = q[0] + q[2], b = q[1] + q[3];
        return a + b;
    }
};

}  // namespace

void matmul_float_scalar(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                         const GemmTiles& tiles) {
    float_matmul<Scalar>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
