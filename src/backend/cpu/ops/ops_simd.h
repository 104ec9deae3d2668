// Internal: the SIMD operators written once over a traits type S (simd::Avx2 / simd::Avx512 from
// simd/avx2.h / simd/avx512.h, instantiated in ops_avx2.cpp / ops_avx512.cpp):
// V, L, load, store, set1, add, sub, mul, div, fma, max, hsum, hmax, exp (vectorised), and for
// interleaved RoPE dup_pairs (each of L/2 values twice) and swap_pairs. Partial final vectors go
// through a zero-padded buffer. Internal linkage: each ISA file gets its own copy.
#pragma once
#include <cmath>
#include <cstring>

namespace pagoda::backend::cpu::detail {
namespace {

template <class S>
inline typename S::V load_part(const float* p, int64_t n, float fill = 0.f) {
    alignas(64) float buf[S::L];
    for (int i = 0; i < S::L; ++i) buf[i] = fill;
    std::memcpy(buf, p, size_t(n) * 4);
    return S::load(buf);
}

template <class S>
inline void store_part(float* p, typename S::V v, int64_t n) {
    alignas(64) float buf[S::L];
    S::store(buf, v);
    std::memcpy(p, buf, size_t(n) * 4);
}

// Applies f to every vector of x (n values) writing out; the tail uses the padded buffer.
template <class S, class F>
inline void map1(const float* x, int64_t n, float* out, F f) {
    int64_t i = 0;
    for (; i + S::L <= n; i += S::L) S::store(out + i, f(S::load(x + i), i));
    if (i < n) store_part<S>(out + i, f(load_part<S>(x + i, n - i), i), n - i);
}

template <class S>
void rms_norm_t(const float* x, const float* weight, int64_t n, float eps, float* out) {
    using V = typename S::V;
    V a0 = S::set1(0), a1 = S::set1(0);
    int64_t i = 0;
    for (; i + 2 * S::L <= n; i += 2 * S::L) {
        V v0 = S::load(x + i), v1 = S::load(x + i + S::L);
        a0 = S::fma(v0, v0, a0);
        a1 = S::fma(v1, v1, a1);
    }
    for (; i < n; i += S::L) {
        V v = i + S::L <= n ? S::load(x + i) : load_part<S>(x + i, n - i);
        a0 = S::fma(v, v, a0);
    }
    const float ss = S::hsum(S::add(a0, a1));
    const V scale = S::set1(float(1.0 / std::sqrt(double(ss) / double(n) + double(eps))));
    int64_t j = 0;
    for (; j + S::L <= n; j += S::L) S::store(out + j, S::mul(S::mul(S::load(x + j), scale), S::load(weight + j)));
    if (j < n)
        store_part<S>(out + j, S::mul(S::mul(load_part<S>(x + j, n - j), scale), load_part<S>(weight + j, n - j)), n - j);
}

template <class S>
void silu_mul_t(const float* gate, const float* up, int64_t n, float* out) {
    using V = typename S::V;
    const V one = S::set1(1.f), zero = S::set1(0.f);
    map1<S>(gate, n, out, [&](V g, int64_t i) {
        V u = i + S::L <= n ? S::load(up + i) : load_part<S>(up + i, n - i);
        return S::mul(S::div(g, S::add(one, S::exp(S::sub(zero, g)))), u);
    });
}

template <class S>
void add_inplace_t(float* y, const float* x, int64_t n) {
    using V = typename S::V;
    map1<S>(y, n, y, [&](V v, int64_t i) {
        return S::add(v, i + S::L <= n ? S::load(x + i) : load_part<S>(x + i, n - i));
    });
}

template <class S>
void softmax_t(float* x, int64_t n) {
    using V = typename S::V;
    if (n <= 0) return;
    V m = S::set1(-INFINITY);
    int64_t i = 0;
    for (; i + S::L <= n; i += S::L) m = S::max(m, S::load(x + i));
    if (i < n) m = S::max(m, load_part<S>(x + i, n - i, -INFINITY));
    const V mx = S::set1(S::hmax(m));
    V sum = S::set1(0.f);
    i = 0;
    for (; i + S::L <= n; i += S::L) {
        V e = S::exp(S::sub(S::load(x + i), mx));
        S::store(x + i, e);
        sum = S::add(sum, e);
    }
    if (i < n) {
        V e = S::exp(S::sub(load_part<S>(x + i, n - i, -INFINITY), mx));  // padding gives exp(-inf) = 0
        store_part<S>(x + i, e, n - i);
        sum = S::add(sum, e);
    }
    const V inv = S::set1(1.f / S::hsum(sum));
    map1<S>(x, n, x, [&](V v, int64_t) { return S::mul(v, inv); });
}

template <class S>
void exp_t(const float* x, int64_t n, float* out) {
    map1<S>(x, n, out, [&](typename S::V v, int64_t) { return S::exp(v); });
}

template <class S>
void rope_t(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos, const float* sin,
            bool neox) {
    using V = typename S::V;
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + h * head_dim;
        if (neox) {
            int64_t i = 0;
            for (; i + S::L <= half; i += S::L) {
                V a = S::load(v + i), b = S::load(v + i + half), c = S::load(cos + i), s = S::load(sin + i);
                S::store(v + i, S::sub(S::mul(a, c), S::mul(b, s)));
                S::store(v + i + half, S::add(S::mul(a, s), S::mul(b, c)));
            }
            for (; i < half; ++i) {
                float a = v[i], b = v[i + half];
                v[i] = a * cos[i] - b * sin[i];
                v[i + half] = a * sin[i] + b * cos[i];
            }
        } else {
            // Pairs (2i, 2i+1): out = x * (c, c) + swap(x) * (-s, s), computed per pair exactly as
            // the reference does (one product each, then one add/sub).
            int64_t i = 0;
            for (; 2 * i + S::L <= 2 * half; i += S::L / 2) {
                V xv = S::load(v + 2 * i);
                V c = S::dup_pairs(cos + i), s = S::dup_pairs(sin + i);
                V p = S::mul(xv, c), q = S::mul(S::swap_pairs(xv), s);
                S::store(v + 2 * i, S::addsub_pairs(p, q));
            }
            for (; i < half; ++i) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cos[i] - b * sin[i];
                v[2 * i + 1] = a * sin[i] + b * cos[i];
            }
        }
    }
}

}  // namespace
}  // namespace pagoda::backend::cpu::detail
