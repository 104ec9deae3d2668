// Internal: the portable traits type of the CPU kernels, simd::Scalar8: 8 emulated f32 lanes in
// plain C++ for baseline x86-64 (no FMA: fma is a separate multiply and add), the same lane layout
// and reduction tree as simd::Avx2 so a kernel written over the traits runs anywhere. Internal linkage, as in simd/avx2.h.
//   arithmetic  zero, load, fma (c + a * b, two roundings)
//   reductions  hsum: (v[j] + v[j+4]), then lanes 0+2 / 1+3, then their sum
//   widening    load_f16, load_bf16 (core/half.h)
#pragma once
#include <cstdint>

#include "core/half.h"

namespace pagoda::backend::cpu::simd {
namespace {  // internal linkage: an ISA file's copy (its flags) is never the one a scalar file links

struct Scalar8 {
    struct V {
        float v[8];
    };
    static constexpr int L = 8;

    static V zero() { return V{}; }
    static V load(const float* p) {
        V r;
        for (int i = 0; i < 8; ++i) r.v[i] = p[i];
        return r;
    }
    static V fma(V a, V b, V c) {
        for (int i = 0; i < 8; ++i) c.v[i] += a.v[i] * b.v[i];
        return c;
    }
    static V load_f16(const uint16_t* p) {
        V r;
        for (int i = 0; i < 8; ++i) r.v[i] = f16_to_f32(p[i]);
        return r;
    }
    static V load_bf16(const uint16_t* p) {
        V r;
        for (int i = 0; i < 8; ++i) r.v[i] = bf16_to_f32(p[i]);
        return r;
    }
    static float hsum(V v) {
        float q[4];
        for (int i = 0; i < 4; ++i) q[i] = v.v[i] + v.v[i + 4];
        const float a = q[0] + q[2], b = q[1] + q[3];
        return a + b;
    }
};

}  // namespace
}  // namespace pagoda::backend::cpu::simd
