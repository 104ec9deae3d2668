// Baseline x86-64 instantiations of the recurrent kernels (recurrent_paths.h): the causal conv
// (conv1d_simd.h) and the chunked gated delta rule (delta_chunk.h, delta_chunk_simd.h), over a
// one-lane traits type in plain C++ (fma: a multiply then an add, two roundings).
#include <cmath>

#include "backend/cpu/ops/conv1d_simd.h"
#include "backend/cpu/ops/delta_chunk_simd.h"
#include "backend/cpu/ops/recurrent_paths.h"

namespace pagoda::backend::cpu::detail {
namespace {

struct Lane1 {
    using V = float;
    static constexpr int L = 1;
    static V zero() { return 0.0f; }
    static V set1(float f) { return f; }
    static V load(const float* p) { return *p; }
    static void store(float* p, V v) { *p = v; }
    static V load_n(const float* p, int) { return *p; }  // n is always 1 lane here: never called
    static void store_n(float* p, V v, int) { *p = v; }
    static V add(V a, V b) { return a + b; }
    static V sub(V a, V b) { return a - b; }
    static V mul(V a, V b) { return a * b; }
    static V div(V a, V b) { return a / b; }
    static V fma(V a, V b, V c) { return c + a * b; }
    static V fnma(V a, V b, V c) { return c - a * b; }
    static V exp(V x) { return std::exp(x); }
};

}  // namespace

void delta_chunk_scalar(const DeltaChunk& c) { delta_chunk_t<Lane1>(c); }

void causal_conv1d_scalar(const CausalConv1d& op, const float* weight, const float* x, int64_t rows, int64_t channels,
                          float* state, float* out, int64_t channel_begin, int64_t channel_end) {
    causal_conv1d_t<Lane1>(op, weight, x, rows, channels, state, out, channel_begin, channel_end);
}

}  // namespace pagoda::backend::cpu::detail
