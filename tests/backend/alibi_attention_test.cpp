// ALiBi (AttentionParams::alibi_max_bias, jina-bert-v2): the head slopes against the values the
// ALiBi paper's rule gives by hand, and every backend's attention against the formula by hand:
// out = sum_j e^(s_j) v_j / sum_j e^(s_j), s_j = scale q.k_j - slope_h |pos_q - j|, over the keys
// the token sees (its sequence's every key when non-causal, 0..pos_q when causal).
#include <cmath>
#include <gtest/gtest.h>

#include "backend/alibi.h"
#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"

namespace pagoda::backend {
namespace {

using namespace testing;

TEST(AlibiSlopes, FollowThePapersRule) {
    // 8 heads, max bias 8: 1/2, 1/4, ..., 1/256.
    for (int32_t h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 8, 8.0), std::ldexp(1.0, -(h + 1)));
    // 12 heads (jina-embeddings-v2-base: 768 / 64): the 8-head series, then the odd steps of the
    // 16-head series 2^(-0.5 k): k = 1, 3, 5, 7.
    for (int32_t h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 12, 8.0), std::ldexp(1.0, -(h + 1)));
    const double sixteen[4] = {std::pow(2.0, -0.5), std::pow(2.0, -1.5), std::pow(2.0, -2.5), std::pow(2.0, -3.5)};
    for (int32_t i = 0; i < 4; ++i) EXPECT_NEAR(alibi_slope(8 + i, 12, 8.0), sixteen[i], 1e-15) << i;
    // 4 heads: 2^-2, 2^-4, 2^-6, 2^-8.
    for (int32_t h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 4, 8.0), std::ldexp(1.0, -2 * (h + 1)));
    // Another max bias: 2^(-b (h + 1) / n).
    EXPECT_DOUBLE_EQ(alibi_slope(1, 2, 4.0), std::ldexp(1.0, -4));
}

TEST(AlibiAttention, MatchesTheFormulaByHand) {
    const int32_t d = 2, heads = 3;  // 3 heads: slopes 2^-4 (of the 2-head series), 2^-8, then 2^-2
    const std::vector<float> k = {1, 0, 0, 1, 1, 1, -1, 0.5f, 0.25f, -2}, v = {1, 2, 3, -1, 0, 5, 2, 2, -1, 1};
    std::vector<float> q;
    for (int i = 0; i < 5 * heads * d; ++i) q.push_back(float((i * 7) % 11) / 4.0f - 1.0f);
    const float scale = 0.5f, max_bias = 8.0f;
    const double slopes[3] = {std::ldexp(1.0, -4), std::ldexp(1.0, -8), std::ldexp(1.0, -2)};
    std::vector<std::string> names = {"cpu", "reference"};
    for (const std::string& device : device_backends_under_test()) names.push_back(device);
    int computed = 0;
    for (const std::string& name : names)
        for (const kv::KvDtype dtype : {kv::KvDtype::f32, kv::KvDtype::f16})
            for (const bool causal : {false, true}) {
                Side side(make_backend(name, {.n_threads = 2}));
                const AttentionParams params{.n_heads = heads, .scale = scale, .causal = causal, .alibi_max_bias = max_bias};
                if (!side->supports_attention(params)) continue;  // the conformance suite checks the refusal
                ++computed;
                const kv::KvLayout layout{.n_layers = 1, .n_kv_heads = 1, .head_dim = d, .block_size = 2, .dtype = dtype};
                std::mt19937 rng(5);
                Step step = make_tables({5}, 2, rng);
                step.add_tokens(0, 0, 5);
                auto cache = side->create_kv_cache(layout, step.n_blocks);
                side->begin_step(step.inputs());
                side->kv_write(*cache, 0, side.input(5, d, k), side.input(5, d, v));
                const Tensor out = side.tensor(5, heads * d);
                side->attention(*cache, 0, side.input(5, heads * d, q), out, params);
                const std::vector<float> got = side.read(out);
                for (int32_t t = 0; t < 5; ++t)
                    for (int32_t h = 0; h < heads; ++h) {
                        const float* qh = q.data() + (t * heads + h) * d;
                        double num[2] = {0, 0}, den = 0;
                        for (int32_t j = 0; j <= (causal ? t : 4); ++j) {
                            const double s = scale * (qh[0] * k[size_t(j * d)] + qh[1] * k[size_t(j * d + 1)]) -
                                             slopes[h] * std::abs(t - j);
                            den += std::exp(s);
                            for (int c = 0; c < d; ++c) num[c] += std::exp(s) * v[size_t(j * d + c)];
                        }
                        for (int c = 0; c < d; ++c)
                            EXPECT_NEAR(got[size_t((t * heads + h) * d + c)], num[c] / den, 1e-5)
                                << name << " " << kv::kv_dtype_name(dtype) << (causal ? " causal" : " non-causal")
                                << " token " << t << " head " << h;
                    }
            }
    EXPECT_GE(computed, 8);  // cpu and reference, both dtypes, both masks
}

}  // namespace
}  // namespace pagoda::backend
