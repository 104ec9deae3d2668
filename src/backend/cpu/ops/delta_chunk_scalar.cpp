// Baseline x86-64 instantiation of the chunked gated delta rule (delta_chunk.h, delta_chunk_simd.h)
// over a one-lane traits type in plain C++ (fma: a multiply then an add, two roundings).
#include <cmath>

#include "backend/cpu/ops/delta_chunk_simd.h"

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
    static V mul(V a, V b) { return a * b; }
    static V fma(V a, V b, V c) { return c + a * b; }
    static V fnma(V a, V b, V c) { return c - a * b; }
    static V exp(V x) { return std::exp(x); }
};

}  // namespace

void delta_chunk_scalar(const DeltaChunk& c) { delta_chunk_t<Lane1>(c); }

}  // namespace pagoda::backend::cpu::detail
