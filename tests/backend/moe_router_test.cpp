// The general mixture-of-experts router (moe_routing.h, MoeRouting): each option against values
// worked out by hand from its formula — softmax over the selected top-k (gpt-oss), sigmoid scoring
// with a score-correction bias and group-limited top-k (DeepSeek V3), the routed scaling factor, a
// correction bias that moves the selection but not the weights, Gemma 4's per-expert scales — and the refusals of routings that
// do not fit the experts. The plain softmax router through the general entry is bitwise the old one.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

#include "backend/moe_routing.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(MoeRouter, SoftmaxOverTheSelectedTopK) {
    const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f};
    MoeRouting r;
    r.scoring = MoeScoring::softmax_selected;
    int32_t ids[2];
    float w[2];
    route_token(logits, 4, 2, false, r, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 2);
    // softmax(3, 2): e / (e + 1), 1 / (e + 1); the other experts' logits play no part.
    EXPECT_NEAR(w[0], std::exp(1.0) / (std::exp(1.0) + 1), 1e-7);
    EXPECT_NEAR(w[1], 1 / (std::exp(1.0) + 1), 1e-7);
}

TEST(MoeRouter, SigmoidWithCorrectionBiasAndGroups) {
    // 8 experts in 4 groups of 2, the best 2 groups kept, top 2, renormalised, scaled by 2.5.
    const float logits[] = {-3.0f, 2.5f, -1.0f, 2.0f, 0.5f, 0.5f, -2.0f, 3.0f};
    MoeRouting r;
    r.scoring = MoeScoring::sigmoid;
    r.correction_bias = {0, 0, 0.5f, 0, 0, 0, 0, -1.0f};
    r.n_groups = 4;
    r.n_groups_used = 2;
    r.scale = 2.5f;
    // selection = sigmoid + bias: .0474 .9241 | .7689 .8808 | .6225 .6225 | .1192 -.0474
    // group scores (sum of the best two): .9716, 1.6497, 1.2449, .0718 -> groups 1 and 2 stay, so
    // expert 1 (.9241, the best overall) is out: experts 3 (.8808) then 2 (.7689).
    int32_t ids[2];
    float w[2];
    route_token(logits, 8, 2, true, r, ids, w);
    EXPECT_EQ(ids[0], 3);
    EXPECT_EQ(ids[1], 2);
    // The weights are the unbiased sigmoids, renormalised, times the scale.
    const double s3 = sigmoid(2.0), s2 = sigmoid(-1.0);
    EXPECT_NEAR(w[0], s3 / (s3 + s2) * 2.5, 1e-6);
    EXPECT_NEAR(w[1], s2 / (s3 + s2) * 2.5, 1e-6);
    // Without the groups expert 1 wins.
    r.n_groups = 0;
    route_token(logits, 8, 2, true, r, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 3);
}

TEST(MoeRouter, CorrectionBiasMovesTheSelectionNotTheWeights) {
    const float logits[] = {2.0f, 1.0f, 0.0f};
    MoeRouting r;
    r.correction_bias = {0, 0, 5.0f};
    int32_t ids[2];
    float w[2];
    route_token(logits, 3, 2, false, r, ids, w);
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[1], 0);
    const double all = std::exp(2.0) + std::exp(1.0) + 1;  // the softmax over all three, unbiased
    EXPECT_NEAR(w[0], 1 / all, 1e-7);
    EXPECT_NEAR(w[1], std::exp(2.0) / all, 1e-7);
}

TEST(MoeRouter, RoutedScaleMultipliesTheWeights) {
    const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
    MoeRouting r;
    r.scale = 16.0f;
    int32_t ids[2];
    float w[2];
    route_token(logits, 4, 2, true, r, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 3);
    EXPECT_NEAR(w[0], 16 * std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-5);
    EXPECT_NEAR(w[0] + w[1], 16.0, 1e-5);
}

TEST(MoeRouter, ExpertScaleMultipliesEachChosenWeight) {
    // Gemma 4's ffn_down_exps.scale: after renormalisation and the routed scale, each chosen
    // expert's weight times its own factor; the selection is unchanged. Plain softmax and sigmoid.
    const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
    MoeRouting r;
    r.expert_scale = {7.0f, 0.5f, 9.0f, 3.0f};
    int32_t ids[2];
    float w[2];
    route_token(logits, 4, 2, true, r, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 3);
    const double sum = std::exp(2.0) + std::exp(1.0);
    EXPECT_NEAR(w[0], 0.5 * std::exp(2.0) / sum, 1e-6);
    EXPECT_NEAR(w[1], 3.0 * std::exp(1.0) / sum, 1e-6);
    r.scoring = MoeScoring::sigmoid;
    r.scale = 2.0f;
    route_token(logits, 4, 2, false, r, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 3);
    EXPECT_NEAR(w[0], 2 * 0.5 * sigmoid(2.0), 1e-6);
    EXPECT_NEAR(w[1], 2 * 3.0 * sigmoid(1.0), 1e-6);
}

TEST(MoeRouter, ThePlainRouterIsBitwiseTheOriginal) {
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0, 2);
    for (int trial = 0; trial < 200; ++trial) {
        float logits[8];
        for (float& l : logits) l = dist(rng);
        for (bool normalize : {false, true}) {
            int32_t a[3], b[3];
            float wa[3], wb[3];
            route_token(logits, 8, 3, normalize, a, wa);
            route_token(logits, 8, 3, normalize, MoeRouting{}, b, wb);
            ASSERT_EQ(std::memcmp(a, b, sizeof a), 0);
            ASSERT_EQ(std::memcmp(wa, wb, sizeof wa), 0);
        }
    }
}

TEST(MoeRouter, RefusesRoutingsThatDoNotFit) {
    const float logits[6] = {};
    int32_t ids[2];
    float w[2];
    MoeRouting r;
    r.correction_bias = {1, 2, 3};
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);  // 3 biases for 6 experts
    r = {};
    r.n_groups = 4;  // 6 experts do not split in 4
    r.n_groups_used = 1;
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);
    r.n_groups = 3;
    r.n_groups_used = 0;
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);
    r.n_groups_used = 1;
    route_token(logits, 6, 2, true, r, ids, w);  // 1 group of 2 holds the 2 used
    r.scale = 0;
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);
    r = {};
    r.expert_scale = {1, 1, 1};  // 3 scales for 6 experts
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);
    r.expert_scale = {1, 1, 1, 1, 1, std::nanf("")};
    EXPECT_THROW(route_token(logits, 6, 2, true, r, ids, w), Error);
}

}  // namespace
}  // namespace pagoda::backend
