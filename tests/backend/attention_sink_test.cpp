// Attention sinks (AttentionParams::sinks, gpt-oss) on every backend against the formula by hand:
// with s_j = scale q.k_j over the keys a token sees, out = sum_j e^(s_j) v_j / (sum_j e^(s_j) +
// e^(sink)) (the sink a logit in the denominator with no value), for each query head's own sink;
// with and without a sliding window, over f32 and f16 caches; on the device backends too.
#include <cmath>
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/vulkan/vulkan_test_env.h"

namespace pagoda::backend {
namespace {

using namespace testing;

TEST(AttentionSinks, MatchTheFormulaByHand) {
    const int32_t d = 2, heads = 2;
    // Keys and values of positions 0..3 (one KV head), each token's two query heads, their sinks.
    const std::vector<float> k = {1, 0, 0, 1, 1, 1, -1, 0.5f}, v = {1, 2, 3, -1, 0, 5, 2, 2};
    const std::vector<float> q = {1, 2, -1, 0.5f, 0.5f, 0.5f, 2, -1, 1, 1, 0, 3, -2, 1, 1.5f, 0};
    const std::vector<float> sinks = {0.7f, -1.5f};
    const float scale = 0.5f;
    std::vector<std::string> names = {"cpu", "reference"};
    for (const std::string& device : device_backends_under_test()) names.push_back(device);
    for (const std::string& name : names)
        for (const kv::KvDtype dtype : {kv::KvDtype::f32, kv::KvDtype::f16})
            for (const int32_t window : {0, 2}) {
                Side side(make_backend(name, {.n_threads = 2}));
                const kv::KvLayout layout{.n_layers = 1, .n_kv_heads = 1, .head_dim = d, .block_size = 2, .dtype = dtype};
                std::mt19937 rng(3);
                Step step = make_tables({4}, 2, rng);
                step.add_tokens(0, 0, 4);
                auto cache = side->create_kv_cache(layout, step.n_blocks);
                side->begin_step(step.inputs());
                side->kv_write(*cache, 0, side.input(4, d, k), side.input(4, d, v));
                const auto sink_vector = side->upload_vector(sinks);
                const AttentionParams params{.n_heads = heads, .scale = scale, .sliding_window = window, .sinks = sink_vector.get()};
                const Tensor out = side.tensor(4, heads * d);
                side->attention(*cache, 0, side.input(4, heads * d, q), out, params);
                const std::vector<float> got = side.read(out);
                for (int32_t t = 0; t < 4; ++t)
                    for (int32_t h = 0; h < heads; ++h) {
                        const float* qh = q.data() + (t * heads + h) * d;
                        double num[2] = {0, 0}, den = std::exp(double(sinks[size_t(h)]));
                        for (int32_t j = window > 0 ? std::max(0, t - window + 1) : 0; j <= t; ++j) {
                            const double e = std::exp(scale * (qh[0] * k[size_t(j * d)] + qh[1] * k[size_t(j * d + 1)]));
                            den += e;
                            for (int c = 0; c < d; ++c) num[c] += e * v[size_t(j * d + c)];
                        }
                        for (int c = 0; c < d; ++c)
                            EXPECT_NEAR(got[size_t((t * heads + h) * d + c)], num[c] / den, 1e-5)
                                << name << " " << kv::kv_dtype_name(dtype) << " window " << window << " token " << t << " head " << h;
                    }
            }
}

}  // namespace
}  // namespace pagoda::backend
