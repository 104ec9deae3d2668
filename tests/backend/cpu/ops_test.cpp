// Every SIMD path of the row operators against the scalar reference. Tolerances: rms_norm 1e-5
// relative (f32 lane sums vs double); exp 4 ulp (relative 5e-7) over [-87, 88]; silu_mul and softmax
// 1e-6 relative + 1e-7 absolute... as asserted below; add_inplace and rope bitwise (same operations).
#include "backend/cpu/ops/ops.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "core/cpu_features.h"

namespace pagoda::backend::cpu {
namespace {

std::vector<Isa> simd_isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::avx2, Isa::avx512})
        if (int(isa) <= int(best_supported_isa())) out.push_back(isa);
    return out;
}

struct IsaGuard {
    Isa isa = active_isa();
    ~IsaGuard() { set_isa(isa); }
};

std::vector<float> randv(int64_t n, std::mt19937& rng, float scale = 1.f) {
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    return v;
}

const int64_t kSizes[] = {1, 7, 8, 15, 16, 17, 33, 100, 4096 + 3};

TEST(Ops, ExpAccuracy) {
    IsaGuard guard;
    std::vector<float> x;
    for (float v = -87.f; v <= 88.f; v += 0.0137f) x.push_back(v);
    x.push_back(0.f);
    x.push_back(-1000.f);
    for (Isa isa : simd_isas()) {
        set_isa(isa);
        std::vector<float> y(x.size());
        exp_f32(x.data(), int64_t(x.size()), y.data());
        for (size_t i = 0; i < x.size(); ++i) {
            float ref = std::exp(x[i]);
            if (x[i] < -87.33f) { EXPECT_EQ(y[i], 0.f); continue; }
            ASSERT_NEAR(y[i], ref, 5e-7f * ref) << isa_name(isa) << " x=" << x[i];
        }
        float one;
        float zero = 0;
        exp_f32(&zero, 1, &one);
        EXPECT_EQ(one, 1.f);
    }
}

TEST(Ops, SimdPathsMatchReference) {
    IsaGuard guard;
    std::mt19937 rng(9);
    for (Isa isa : simd_isas()) {
        set_isa(isa);
        for (int64_t n : kSizes) {
            auto x = randv(n, rng, 3.f), w = randv(n, rng), u = randv(n, rng);
            std::vector<float> a(x.size()), b(x.size());
            rms_norm(x.data(), w.data(), n, 1e-5f, a.data());
            rms_norm_reference(x.data(), w.data(), n, 1e-5f, b.data());
            for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[size_t(i)], b[size_t(i)], 1e-5f * std::fabs(b[size_t(i)]) + 1e-7f) << "rms " << n;

            silu_mul(x.data(), u.data(), n, a.data());
            silu_mul_reference(x.data(), u.data(), n, b.data());
            for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[size_t(i)], b[size_t(i)], 2e-6f * std::fabs(b[size_t(i)]) + 1e-7f) << "silu " << n;

            a = x; b = x;
            add_inplace(a.data(), w.data(), n);
            add_inplace_reference(b.data(), w.data(), n);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), size_t(n) * 4), 0);

            a = x; b = x;
            softmax(a.data(), n);
            softmax_reference(b.data(), n);
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_NEAR(a[size_t(i)], b[size_t(i)], 2e-6f * b[size_t(i)] + 1e-9f) << "softmax " << n;
                sum += a[size_t(i)];
            }
            EXPECT_NEAR(sum, 1.0, 1e-5);
        }
        // Extreme inputs: softmax with -inf (masked) entries and a large spread; silu far negative.
        std::vector<float> s = {-INFINITY, 1000.f, 999.f, -INFINITY, 0.f, -1e30f, 998.f, 1.f, 2.f};
        std::vector<float> r = s;
        softmax(s.data(), int64_t(s.size()));
        softmax_reference(r.data(), int64_t(r.size()));
        for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], r[i], 1e-6f) << i;
        float g[3] = {-200.f, 200.f, 0.f}, up[3] = {1.f, 1.f, 1.f}, o[3];
        silu_mul(g, up, 3, o);
        EXPECT_NEAR(o[0], 0.f, 1e-30f);
        EXPECT_EQ(o[1], 200.f);
        EXPECT_EQ(o[2], 0.f);
    }
}

TEST(Ops, RopeMatchesReferenceBitwise) {
    IsaGuard guard;
    std::mt19937 rng(4);
    for (Isa isa : simd_isas()) {
        set_isa(isa);
        for (bool neox : {false, true}) {
            for (int64_t head_dim : {64, 80, 128}) {
                for (int64_t n_rot : {head_dim, head_dim / 2 + (head_dim / 2) % 2 * 0, int64_t(24)}) {
                    const int64_t n_heads = 3;
                    auto x = randv(n_heads * head_dim, rng);
                    std::vector<float> c(size_t(n_rot / 2)), s(size_t(n_rot / 2));
                    for (size_t i = 0; i < c.size(); ++i) {
                        c[i] = std::cos(0.37f * float(i + 1));
                        s[i] = std::sin(0.37f * float(i + 1));
                    }
                    auto a = x, b = x;
                    rope(a.data(), n_heads, head_dim, n_rot, c.data(), s.data(), neox);
                    rope_reference(b.data(), n_heads, head_dim, n_rot, c.data(), s.data(), neox);
                    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
                        << isa_name(isa) << " neox " << neox << " dim " << head_dim << " rot " << n_rot;
                }
            }
        }
    }
}

// gelu_mul (tanh GELU through exp_f32) on the scalar path and every SIMD path against the tanh
// formula in double, over values up to the extremes where the exp clamps (|g| up to 40), long rows
// crossing its chunks, and in place.
TEST(Ops, GeluMulMatchesTheTanhFormulaOnEveryPath) {
    IsaGuard guard;
    std::mt19937 rng(9);
    std::vector<float> g = randv(1000, rng, 3.f), up = randv(1000, rng);
    for (float v : {0.f, -0.f, 40.f, -40.f, 10.f, -10.f, 1e-20f, -1e-20f}) g.push_back(v), up.push_back(1.5f);
    std::vector<Isa> isas = {Isa::scalar};
    for (Isa isa : simd_isas()) isas.push_back(isa);
    for (Isa isa : isas) {
        set_isa(isa);
        std::vector<float> out(g.size()), inplace = g;
        gelu_mul(g.data(), up.data(), int64_t(g.size()), out.data());
        gelu_mul(inplace.data(), up.data(), int64_t(g.size()), inplace.data());
        for (size_t i = 0; i < g.size(); ++i) {
            const double x = g[i];
            const double want = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * up[i];
            ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(x * up[i]) + 1e-30) << isa_name(isa) << " g=" << x;
            EXPECT_EQ(inplace[i], out[i]);
        }
    }
}

TEST(Ops, ReferenceRmsNormGolden) {
    // x = (3, 4): mean square 12.5, scale 1/sqrt(12.5).
    float x[2] = {3.f, 4.f}, w[2] = {1.f, 2.f}, out[2];
    rms_norm_reference(x, w, 2, 0.f, out);
    EXPECT_NEAR(out[0], 3.f / std::sqrt(12.5f), 1e-6f);
    EXPECT_NEAR(out[1], 8.f / std::sqrt(12.5f), 1e-6f);
}

}  // namespace
}  // namespace pagoda::backend::cpu
