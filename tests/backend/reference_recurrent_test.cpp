// The reference backend's recurrent ops (backend.h: CausalConv1d, GatedDeltaRule) against cases
// worked by hand: the conformance suite compares the other backends with these, so this file keeps
// the oracle honest. Head dimension 1 makes the l2 norm a sign and the delta rule scalar
// arithmetic; four value heads over two key heads pin the head tiling (h % n_k_heads).
#include <cmath>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"

namespace pagoda::backend {
namespace {

using testing::close;
using testing::Side;

constexpr double kTol = 1e-6;

TEST(ReferenceRecurrent, CausalConv1dSlidesItsWindow) {
    Side s(make_backend("reference"));
    // One channel, taps [1, 2, 3] (3 on the current token), the state holding 10 then 20.
    const auto w = s->upload_vector(std::vector<float>{1, 2, 3});
    const std::vector<int32_t> rows{0, 0};
    const Tensor x = s.input(2, 1, {1, -1}), out = s.tensor(2, 1), state = s.input(1, 2, {10, 20});
    s->causal_conv1d({w.get(), 3, false, rows}, x, state, out);
    // 10 + 2 * 20 + 3 * 1 = 53, then 20 + 2 * 1 + 3 * -1 = 19; the state keeps the last two inputs.
    EXPECT_TRUE(close(s.read(out), {53, 19}, kTol));
    EXPECT_EQ(s.read(state), (std::vector<float>{1, -1}));
    // With silu, from an empty state: 3 * -1 = -3, silu(-3) = -3 / (1 + e^3).
    const Tensor x2 = s.input(1, 1, {-1}), out2 = s.tensor(1, 1), state2 = s.input(1, 2, {0, 0});
    s->causal_conv1d({w.get(), 3, true, std::span(rows).first(1)}, x2, state2, out2);
    EXPECT_TRUE(close(s.read(out2), {float(-3 / (1 + std::exp(3.0)))}, kTol));
}

TEST(ReferenceRecurrent, SigmoidMulGates) {
    Side s(make_backend("reference"));
    // sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4.
    const Tensor g = s.input(1, 3, {0, float(std::log(3.0)), float(-std::log(3.0))}), u = s.input(1, 3, {4, 4, -8});
    const Tensor out = s.tensor(1, 3);
    s->sigmoid_mul(g, u, out);
    EXPECT_TRUE(close(s.read(out), {2, 3, -2}, kTol));
}

TEST(ReferenceRecurrent, GatedDeltaRuleByHand) {
    Side s(make_backend("reference"));
    const std::vector<int32_t> rows{0, 0};
    // d = 1: qn = sign(q) * scale, kn = sign(k). Token 0: S = 4 * 0.5 = 2; S^T kn = -2;
    // delta = 0.5 * (5 + 2) = 3.5; S = 2 - 3.5 = -1.5; out = -1.5 * 1. Token 1 (g 0, beta 1, k 1,
    // v 0): delta = 0 + 1.5; S = 0; out = 0.
    const Tensor q = s.input(2, 1, {2, 1}), k = s.input(2, 1, {-3, 1}), v = s.input(2, 1, {5, 0});
    const Tensor g = s.input(2, 1, {float(std::log(0.5)), 0}), beta = s.input(2, 1, {0.5f, 1});
    const Tensor state = s.input(1, 1, {4}), out = s.tensor(2, 1);
    s->gated_delta_rule({1, 1, 1, 1.0f, 1e-6f, rows}, q, k, v, g, beta, state, out);
    EXPECT_TRUE(close(s.read(out), {-1.5f, 0}, kTol));
    EXPECT_TRUE(close(s.read(state), {0}, kTol));
}

TEST(ReferenceRecurrent, ValueHeadsTileTheKeyHeads) {
    Side s(make_backend("reference"));
    // Key heads k = [1, -1], q = [1, 1]; S starts at 0, no decay, beta 1: S_h = kn * v_h and
    // out_h = kn * qn * v_h with kn, qn of key head h % 2: [1, -2, 3, -4] (h / 2 would give
    // [1, 2, -3, -4]).
    const std::vector<int32_t> rows{0};
    const Tensor q = s.input(1, 2, {1, 1}), k = s.input(1, 2, {1, -1}), v = s.input(1, 4, {1, 2, 3, 4});
    const Tensor g = s.input(1, 4, {0, 0, 0, 0}), beta = s.input(1, 4, {1, 1, 1, 1});
    const Tensor state = s.input(1, 4, {0, 0, 0, 0}), out = s.tensor(1, 4);
    s->gated_delta_rule({2, 4, 1, 1.0f, 1e-6f, rows}, q, k, v, g, beta, state, out);
    EXPECT_TRUE(close(s.read(out), {1, -2, 3, -4}, kTol));
    EXPECT_TRUE(close(s.read(state), {1, -2, 3, -4}, kTol));
}

}  // namespace
}  // namespace pagoda::backend
