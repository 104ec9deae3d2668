// Internal: e^x written once over a traits type S, the bodies of simd::Avx2 / simd::Avx512's exp and
// exp_nonpositive (include only through simd/avx2.h or simd/avx512.h: their flags), so both ISAs run
// the same operations lane for lane. S provides set1, add, mul, min, max, fma (c + a * b), fnma
// (c - a * b), round (to nearest even), pow2 (2^n for integral n in the normal exponent range, the
// exponent bits built in integer lanes), zero_below(v, x, lo) (v, zero where x < lo; a NaN x keeps v)
// and underflow(v, x, lo) (exp_nonpositive's: zero where x is below lo, NaN x as that ISA decides).
// Both reduce x = n ln2 + r, |r| <= ln2/2, with ln2 in two parts (Cody-Waite), then scale by 2^n.
#pragma once

namespace pagoda::backend::cpu::simd {
namespace {

// e^x: e^r by its degree-7 Taylor polynomial (truncation error < 1e-9 relative); 0 below -87.33,
// x clamped to 88.37 above.
template <class S>
inline typename S::V exp_poly7(typename S::V x) {
    using V = typename S::V;
    const V lo = S::set1(-87.33f);
    const V in = x;
    x = S::min(S::max(x, lo), S::set1(88.37f));
    const V n = S::round(S::mul(x, S::set1(1.44269504089f)));
    V r = S::fnma(n, S::set1(0.693359375f), x);
    r = S::fnma(n, S::set1(-2.12194440e-4f), r);
    V p = S::set1(1.f / 5040);
    p = S::fma(p, r, S::set1(1.f / 720));
    p = S::fma(p, r, S::set1(1.f / 120));
    p = S::fma(p, r, S::set1(1.f / 24));
    p = S::fma(p, r, S::set1(1.f / 6));
    p = S::fma(p, r, S::set1(0.5f));
    p = S::fma(p, r, S::set1(1.f));
    p = S::fma(p, r, S::set1(1.f));
    return S::zero_below(S::mul(p, S::pow2(n)), in, lo);
}

// e^x for x <= 0 (the attention softmax): a degree-6 polynomial (Cephes-style), about 1 ulp; exactly
// 0 below -87.34 (and for -inf), where float exp underflows to subnormals; exp(0) is exactly 1.
template <class S>
inline typename S::V exp_nonpositive_poly(typename S::V x) {
    using V = typename S::V;
    const V lo = S::set1(-87.33654f);
    const V in = x;
    x = S::max(x, lo);
    const V n = S::round(S::mul(x, S::set1(1.44269504088896341f)));
    V r = S::fnma(n, S::set1(0.693359375f), x);
    r = S::fnma(n, S::set1(-2.12194440e-4f), r);
    V p = S::set1(1.9875691500e-4f);
    p = S::fma(p, r, S::set1(1.3981999507e-3f));
    p = S::fma(p, r, S::set1(8.3334519073e-3f));
    p = S::fma(p, r, S::set1(4.1665795894e-2f));
    p = S::fma(p, r, S::set1(1.6666665459e-1f));
    p = S::fma(p, r, S::set1(5.0000001201e-1f));
    p = S::fma(p, S::mul(r, r), S::add(r, S::set1(1.0f)));
    return S::underflow(S::mul(p, S::pow2(n)), in, lo);
}

}  // namespace
}  // namespace pagoda::backend::cpu::simd
