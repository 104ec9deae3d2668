// The mixture-of-experts op (Backend::moe_ffn) of every backend: top-k routing (ties to the lower
// index, renormalisation on and off), the mixture and the sigmoid-gated shared expert against a
// hand computation in doubles, that an expert no token selects is never read (its weights poisoned
// with NaN change nothing, in a decode step and in a prefill), and batch invariance (a token's row
// is bitwise the same alone or among others), at float and quantised expert types.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <tuple>

#include "backend/backend_test_util.h"
#include "backend/moe_routing.h"
#include "backend/vulkan/vulkan_test_env.h"
#include "core/error.h"
#include "quant/dequantize.h"

namespace pagoda::backend {
namespace {

using gguf::GgmlType;
using namespace testing;

TEST(MoeRouting, PicksLargestLogitsWithTiesToTheLowerIndex) {
    const float logits[] = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
    int32_t ids[3];
    float w[3];
    route_token(logits, 5, 3, true, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 2);
    EXPECT_EQ(ids[2], 4);
    for (float v : w) EXPECT_NEAR(v, 1.0 / 3, 1e-7);
}

TEST(MoeRouting, RenormalisesTheTopKOnlyWhenAsked) {
    const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f};
    int32_t ids[2];
    float w[2];
    double all = 0;
    for (float l : logits) all += std::exp(double(l));
    route_token(logits, 4, 2, false, ids, w);
    ASSERT_EQ(ids[0], 1);
    ASSERT_EQ(ids[1], 3);
    EXPECT_NEAR(w[0], std::exp(2.0) / all, 1e-7);  // the softmax over all four experts
    EXPECT_NEAR(w[1], std::exp(1.0) / all, 1e-7);
    route_token(logits, 4, 2, true, ids, w);
    EXPECT_NEAR(w[0] + w[1], 1.0, 1e-7);
    EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-7);
    EXPECT_THROW(route_token(logits, 4, 5, true, ids, w), Error);
    EXPECT_THROW(route_token(logits, 4, 0, true, ids, w), Error);
}

std::vector<double> dequantised(const HostMatrix& m) {
    std::vector<double> out(size_t(m.rows * m.cols));
    std::vector<float> row(size_t(m.cols));
    const uint64_t rb = *gguf::row_size(m.type, m.cols);
    for (int64_t r = 0; r < m.rows; ++r) {
        const uint8_t* src = m.bytes.data() + uint64_t(r) * rb;
        if (m.type == GgmlType::F32) {
            std::memcpy(row.data(), src, rb);
        } else if (m.type == GgmlType::F16) {
            for (int64_t c = 0; c < m.cols; ++c) {
                uint16_t h;
                std::memcpy(&h, src + 2 * c, 2);
                row[size_t(c)] = f16_to_f32(h);
            }
        } else {
            quant::dequantize_row(m.type, src, row.data(), m.cols);
        }
        for (int64_t c = 0; c < m.cols; ++c) out[size_t(r * m.cols + c)] = row[size_t(c)];
    }
    return out;
}

// Experts with weights in host memory, uploaded to one backend.
struct Mixture {
    int64_t d = 0, f = 0, fs = 0, n_experts = 4;
    std::vector<HostMatrix> gate, up, down;
    HostMatrix sgate, sup, sdown;
    std::vector<float> shared_gate;

    Mixture(GgmlType type, int64_t d_, int64_t f_, int64_t fs_, std::mt19937& rng) : d(d_), f(f_), fs(fs_) {
        for (int64_t e = 0; e < n_experts; ++e) {
            gate.push_back(random_matrix(type, f, d, rng, "gate"));
            up.push_back(random_matrix(type, f, d, rng, "up"));
            down.push_back(random_matrix(type, d, f, rng, "down"));
        }
        sgate = random_matrix(type, fs, d, rng, "shared_gate");
        sup = random_matrix(type, fs, d, rng, "shared_up");
        sdown = random_matrix(type, d, fs, rng, "shared_down");
        shared_gate = random_values(d, rng, 0.3f);
    }
    void poison(int64_t e) {  // NaN in every value of expert e (F32 only)
        for (auto* m : {&gate[size_t(e)], &up[size_t(e)], &down[size_t(e)]}) {
            ASSERT_EQ(m->type, GgmlType::F32);
            const float nan = std::nanf("");
            for (size_t i = 0; i < m->bytes.size(); i += 4) std::memcpy(m->bytes.data() + i, &nan, 4);
        }
    }

    struct Uploaded {
        std::vector<std::shared_ptr<Weight>> weights;
        std::shared_ptr<Vector> gate_vector;
        MoeOp op;
    };
    Uploaded upload(Backend& b, int32_t k, bool normalize, bool shared) const {
        Uploaded u;
        u.op.n_used = k;
        u.op.normalize = normalize;
        for (int64_t e = 0; e < n_experts; ++e) {
            u.weights.push_back(b.upload_weight({gate[size_t(e)].source(), up[size_t(e)].source()}, WeightUse::matmul));
            u.op.gate_up.push_back(u.weights.back().get());
            u.weights.push_back(b.upload_weight({down[size_t(e)].source()}, WeightUse::matmul));
            u.op.down.push_back(u.weights.back().get());
        }
        if (shared) {
            u.weights.push_back(b.upload_weight({sgate.source(), sup.source()}, WeightUse::matmul));
            u.op.shared_gate_up = u.weights.back().get();
            u.weights.push_back(b.upload_weight({sdown.source()}, WeightUse::matmul));
            u.op.shared_down = u.weights.back().get();
            u.gate_vector = b.upload_vector(shared_gate);
            u.op.shared_gate = u.gate_vector.get();
        }
        return u;
    }

    // out = sum over the chosen experts (given) of w * swiglu, + sigmoid(g.x) * shared(x), in doubles.
    static void swiglu(const HostMatrix& g, const HostMatrix& u, const HostMatrix& dn, const float* x, double* y) {
        const auto G = dequantised(g), U = dequantised(u), D = dequantised(dn);
        std::vector<double> h(size_t(g.rows));
        for (int64_t r = 0; r < g.rows; ++r) {
            double a = 0, b = 0;
            for (int64_t c = 0; c < g.cols; ++c) {
                a += G[size_t(r * g.cols + c)] * x[c];
                b += U[size_t(r * g.cols + c)] * x[c];
            }
            h[size_t(r)] = a / (1 + std::exp(-a)) * b;
        }
        for (int64_t r = 0; r < dn.rows; ++r) {
            double acc = 0;
            for (int64_t c = 0; c < dn.cols; ++c) acc += D[size_t(r * dn.cols + c)] * h[size_t(c)];
            y[r] = acc;
        }
    }
};

// Router logits for T tokens: random, except expert 3, which no token selects.
std::vector<float> router_logits(int64_t tokens, std::mt19937& rng) {
    std::vector<float> l = random_values(tokens * 4, rng, 2.0f);
    for (int64_t t = 0; t < tokens; ++t) l[size_t(t * 4 + 3)] = -50.0f;
    return l;
}

std::vector<float> run(Side& side, const MoeOp& op, int64_t tokens, int64_t d, const std::vector<float>& x,
                       const std::vector<float>& logits) {
    side.reset();
    const Tensor xt = side.input(tokens, d, x);
    const Tensor lt = side.input(tokens, int64_t(op.gate_up.size()), logits);
    const Tensor out = side.tensor(tokens, d);
    const Tensor ws = side.tensor(tokens, side->moe_workspace_cols(op));
    side->moe_ffn(op, xt, lt, out, ws);
    return side.read(out);
}

struct Case {
    std::string backend;
    GgmlType type;
    int64_t d, f, fs;
    // Relative to max |expected|: f32 sums for F32; two chained matmuls with activations rounded to
    // bf16 (F16 where the CPU has AVX512_BF16) or quantised to int8 (block types) on the cpu.
    double tolerance;
};

class MoeFfn : public ::testing::TestWithParam<Case> {};

TEST_P(MoeFfn, MatchesTheMixtureComputedByHand) {
    const Case& c = GetParam();
    std::mt19937 rng(17);
    Mixture mix(c.type, c.d, c.f, c.fs, rng);
    Side side(make_backend(c.backend, {.n_threads = 2}));
    const int64_t T = 6;
    const std::vector<float> x = random_values(T * c.d, rng), logits = router_logits(T, rng);
    for (bool normalize : {true, false}) {
        for (bool shared : {false, true}) {
            const auto u = mix.upload(*side, 2, normalize, shared);
            const auto got = run(side, u.op, T, c.d, x, logits);
            std::vector<double> want(static_cast<size_t>(T * c.d), 0.0), y(static_cast<size_t>(c.d));
            for (int64_t t = 0; t < T; ++t) {
                const float* l = logits.data() + t * 4;
                int32_t ids[2];
                float w[2];
                route_token(l, 4, 2, normalize, ids, w);
                for (int j = 0; j < 2; ++j) {
                    Mixture::swiglu(mix.gate[size_t(ids[j])], mix.up[size_t(ids[j])], mix.down[size_t(ids[j])],
                                    x.data() + t * c.d, y.data());
                    for (int64_t i = 0; i < c.d; ++i) want[size_t(t * c.d + i)] += double(w[j]) * y[size_t(i)];
                }
                if (!shared) continue;
                double dot = 0;
                for (int64_t i = 0; i < c.d; ++i) dot += double(mix.shared_gate[size_t(i)]) * x[size_t(t * c.d + i)];
                Mixture::swiglu(mix.sgate, mix.sup, mix.sdown, x.data() + t * c.d, y.data());
                for (int64_t i = 0; i < c.d; ++i) want[size_t(t * c.d + i)] += y[size_t(i)] / (1 + std::exp(-dot));
            }
            double scale = 0;
            for (double v : want) scale = std::max(scale, std::abs(v));
            for (size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], c.tolerance * scale)
                    << "normalize " << normalize << " shared " << shared << " element " << i;
        }
    }
}

TEST_P(MoeFfn, RowsAreBatchInvariant) {
    const Case& c = GetParam();
    std::mt19937 rng(23);
    Mixture mix(c.type, c.d, c.f, c.fs, rng);
    Side side(make_backend(c.backend, {.n_threads = 2}));
    const auto u = mix.upload(*side, 2, true, true);
    const int64_t T = 9;
    const std::vector<float> x = random_values(T * c.d, rng), logits = router_logits(T, rng);
    const auto all = run(side, u.op, T, c.d, x, logits);
    for (int64_t t = 0; t < T; ++t) {
        const std::vector<float> xt(x.begin() + t * c.d, x.begin() + (t + 1) * c.d);
        const std::vector<float> lt(logits.begin() + t * 4, logits.begin() + (t + 1) * 4);
        const auto alone = run(side, u.op, 1, c.d, xt, lt);
        ASSERT_EQ(std::memcmp(alone.data(), all.data() + t * c.d, size_t(c.d) * sizeof(float)), 0) << "token " << t;
    }
}

const Case kCases[] = {
    {"cpu", GgmlType::F32, 24, 16, 20, 1e-5},       {"reference", GgmlType::F32, 24, 16, 20, 1e-6},
    {"cpu", GgmlType::F16, 40, 24, 8, 3e-2},        {"cpu", GgmlType::Q8_0, 64, 32, 64, 2e-2},
    {"cpu", GgmlType::Q4_0, 64, 64, 32, 2e-2},      {"cpu", GgmlType::Q4_K, 256, 256, 256, 2e-2},
    {"reference", GgmlType::Q4_K, 256, 256, 256, 1e-6},
};
INSTANTIATE_TEST_SUITE_P(Backends, MoeFfn, ::testing::ValuesIn(kCases), [](const auto& info) {
    return info.param.backend + "_" + gguf::type_name(uint32_t(info.param.type));
});
// The device backends (vulkan where this build and machine have it): f32 activations throughout, the
// weights dequantised exactly, so every type within f32 rounding of the hand computation.
std::vector<Case> device_cases() {
    std::vector<Case> out;
    for (const std::string& b : device_backends_under_test())
        for (const Case& c : {Case{b, GgmlType::F32, 24, 16, 20, 1e-5}, Case{b, GgmlType::F16, 40, 24, 8, 1e-5},
                              Case{b, GgmlType::Q8_0, 64, 32, 64, 1e-5}, Case{b, GgmlType::Q4_K, 256, 256, 256, 1e-5},
                              Case{b, GgmlType::MXFP4, 64, 32, 64, 1e-5}, Case{b, GgmlType::IQ4_XS, 256, 256, 256, 1e-5}})
            out.push_back(c);
    return out;
}
INSTANTIATE_TEST_SUITE_P(Devices, MoeFfn, ::testing::ValuesIn(device_cases()), [](const auto& info) {
    return info.param.backend + "_" + gguf::type_name(uint32_t(info.param.type));
});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MoeFfn);

// gpt-oss's experts: the router's softmax over the selected top-k, per-expert biases on gate, up
// and down, and the clamped SwiGLU (g' = min(g, 7), u' = clamp(u, -7, 7), g' sigmoid(1.702 g') (u' + 1));
// also GELU experts and a sigmoid router with a routed scale and per-expert output scales. Against the mixture computed by hand
// in doubles; the gate and up scaled up so the clamps bite.
TEST(MoeFfnOptions, BiasedExpertsWithEachActivation) {
    std::vector<std::tuple<std::string, GgmlType, double>> cases = {
        {"cpu", GgmlType::F32, 1e-5}, {"reference", GgmlType::F32, 1e-6}, {"cpu", GgmlType::MXFP4, 3e-2}, {"reference", GgmlType::MXFP4, 1e-6}};
    for (const std::string& device : device_backends_under_test()) {
        cases.emplace_back(device, GgmlType::F32, 1e-5);
        cases.emplace_back(device, GgmlType::MXFP4, 1e-5);  // gpt-oss's experts
    }
    for (const auto& [backend, type, tolerance] : cases) {
        std::mt19937 rng(29);
        const int64_t d = 64, f = 32, T = 7;
        Mixture mix(type, d, f, 32, rng);
        Side side(make_backend(backend, {.n_threads = 2}));
        const std::vector<float> x = random_values(T * d, rng, 3.0f), logits = random_values(T * 4, rng, 2.0f);
        std::vector<std::vector<float>> gb, ub, db;
        for (int e = 0; e < 4; ++e) {
            gb.push_back(random_values(f, rng, 1.0f));
            ub.push_back(random_values(f, rng, 1.0f));
            db.push_back(random_values(d, rng, 0.5f));
        }
        for (const auto activation : {MoeActivation::swiglu_oai, MoeActivation::gelu}) {
            auto u = mix.upload(*side, 2, false, false);
            std::vector<std::shared_ptr<Vector>> keep;
            for (int e = 0; e < 4; ++e)
                for (auto [list, values] : {std::pair{&u.op.gate_bias, &gb[size_t(e)]}, std::pair{&u.op.up_bias, &ub[size_t(e)]},
                                            std::pair{&u.op.down_bias, &db[size_t(e)]}}) {
                    keep.push_back(side->upload_vector(*values));
                    list->push_back(keep.back().get());
                }
            u.op.activation = activation;
            if (activation == MoeActivation::swiglu_oai) {
                u.op.routing.scoring = MoeScoring::softmax_selected;
            } else {
                u.op.routing.scoring = MoeScoring::sigmoid;
                u.op.routing.scale = 2.0f;
                // Gemma 4's per-expert output scales (the device router has none: Vulkan refuses them).
                if (backend == "cpu" || backend == "reference") u.op.routing.expert_scale = {0.5f, 1.5f, 2.0f, 0.25f};
            }
            const auto got = run(side, u.op, T, d, x, logits);
            std::vector<double> want(static_cast<size_t>(T * d), 0.0);
            for (int64_t t = 0; t < T; ++t) {
                int32_t ids[2];
                float w[2];
                route_token(logits.data() + t * 4, 4, 2, false, u.op.routing, ids, w);
                for (int j = 0; j < 2; ++j) {
                    const auto e = size_t(ids[j]);
                    const auto G = dequantised(mix.gate[e]), U = dequantised(mix.up[e]), D = dequantised(mix.down[e]);
                    std::vector<double> h(static_cast<size_t>(f));
                    for (int64_t r = 0; r < f; ++r) {
                        double a = gb[e][size_t(r)], b = ub[e][size_t(r)];
                        for (int64_t c = 0; c < d; ++c) {
                            a += G[size_t(r * d + c)] * x[size_t(t * d + c)];
                            b += U[size_t(r * d + c)] * x[size_t(t * d + c)];
                        }
                        if (activation == MoeActivation::swiglu_oai) {
                            const double g = std::min(a, 7.0), v = std::clamp(b, -7.0, 7.0);
                            h[size_t(r)] = g / (1 + std::exp(-1.702 * g)) * (v + 1);
                        } else {
                            h[size_t(r)] = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))) * b;
                        }
                    }
                    for (int64_t r = 0; r < d; ++r) {
                        double acc = db[e][size_t(r)];
                        for (int64_t c = 0; c < f; ++c) acc += D[size_t(r * f + c)] * h[size_t(c)];
                        want[size_t(t * d + r)] += double(w[j]) * acc;
                    }
                }
            }
            double scale = 0;
            for (double v : want) scale = std::max(scale, std::abs(v));
            for (size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], tolerance * scale) << backend << " " << gguf::type_name(uint32_t(type)) << " "
                                                                << moe_activation_name(activation) << " element " << i;
        }
    }
}

// Expert 3 is selected by no token: with NaN in all of its weights the outputs stay finite and
// bitwise those of the clean weights, in a decode step (1 token) and a prefill (7 tokens).
TEST(MoeFfnReads, OnlyTheSelectedExperts) {
    std::vector<std::string> backends = {"cpu", "reference"};
    for (const std::string& device : device_backends_under_test()) backends.push_back(device);
    for (const std::string& backend : backends) {
        std::mt19937 rng(5);
        Mixture clean(GgmlType::F32, 32, 24, 16, rng);
        Mixture poisoned = clean;
        poisoned.poison(3);
        Side side(make_backend(backend, {.n_threads = 2}));
        const auto a = clean.upload(*side, 2, true, true);
        const auto b = poisoned.upload(*side, 2, true, true);
        for (int64_t T : {1, 7}) {
            const std::vector<float> x = random_values(T * 32, rng), logits = router_logits(T, rng);
            const auto want = run(side, a.op, T, 32, x, logits);
            const auto got = run(side, b.op, T, 32, x, logits);
            for (float v : got) ASSERT_TRUE(std::isfinite(v)) << backend << " T " << T;
            EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << backend << " T " << T;
        }
        // ...and the poison is live: route a token to expert 3 and its output is NaN.
        std::vector<float> logits = {0.0f, -9.0f, -9.0f, 5.0f};
        const auto nan = run(side, b.op, 1, 32, random_values(32, rng), logits);
        EXPECT_TRUE(std::isnan(nan[0])) << backend;
    }
}

}  // namespace
}  // namespace pagoda::backend
