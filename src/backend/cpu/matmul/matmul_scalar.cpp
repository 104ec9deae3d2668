// Portable f32 path of matmul: the same blocked algorithm over 8 emulated lanes (simd/scalar.h), with
// separate multiply and add (baseline x86-64 has no FMA), so it runs on any CPU.
#include "backend/cpu/matmul/float_gemm.h"
#include "backend/cpu/simd/scalar.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct ScalarGemm : simd::Scalar8 {
    static constexpr int R = 4, T = 2;
};

}  // namespace

void matmul_float_scalar(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
                         const GemmTiles& tiles) {
    float_matmul<ScalarGemm>(w, x, n, y, pool, tiles);
}

}  // namespace pagoda::backend::cpu::detail
