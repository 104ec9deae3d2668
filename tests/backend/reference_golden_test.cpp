// The reference backend against values computed by hand, so the oracle of the conformance suite
// is checked independently of any other code: a 2x3 matmul, RMSNorm, the gated activations, RoPE
// of two heads at position 3 in both pairings, attention over two keys (GQA, softcap, window), the
// rounding of the KV cache, and the registry. Tolerance 1e-6: results come back as floats.
#include <gtest/gtest.h>

#include "backend/backend_test_util.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace pagoda::backend {
namespace {

using namespace testing;

constexpr float kTol = 1e-6f;

void expect_values(const std::vector<float>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], kTol) << "value " << i;
}

Side reference() { return Side(make_reference_backend({}), 4096); }

TEST(ReferenceGolden, Matmul2x3) {
    Side s = reference();
    const float w[] = {1, 2, 3, 4, 5, 6};
    auto weight = s->upload_weight({{gguf::GgmlType::F32, w, 2, 3, "w"}}, WeightUse::matmul);
    const Tensor x = s.input(2, 3, {1, 0.5f, -1, 0, 1, 2}), y = s.tensor(2, 2);
    s->matmul(*weight, x, std::span(&y, 1));
    expect_values(s.read(y), {-1, 0.5, 8, 17});
}

TEST(ReferenceGolden, RmsNormAndGatedActivations) {
    Side s = reference();
    const Tensor x = s.input(1, 2, {3, 4});
    s->rms_norm(x, *s->upload_vector(std::vector<float>{1, 2}), 0.0f, x);  // rms = sqrt(12.5)
    expect_values(s.read(x), {3 / std::sqrt(12.5), 8 / std::sqrt(12.5)});

    const Tensor gate = s.input(1, 2, {1, 1}), up = s.input(1, 2, {2, 2});
    const Tensor silu = s.tensor(1, 2), gelu = s.tensor(1, 2);
    s->silu_mul(gate, up, silu);
    s->gelu_mul(gate, up, gelu);
    expect_values(s.read(silu), {1.4621171572600098, 1.4621171572600098});  // 2 / (1 + e^-1)
    expect_values(s.read(gelu), {1.6823839812165535, 1.6823839812165535});  // 2 * gelu_tanh(1)
}

// Two heads of 4 values at position 3, inv_freq {1, 0.1}: pair 0 turns by 3 rad, pair 1 by 0.3.
std::vector<float> rope_at_3(bool neox) {
    Side s = reference();
    auto rope = s->upload_rope({4, neox, {1.0, 0.1}});
    std::mt19937 rng(1);
    Step step = make_tables({4}, 4, rng);
    step.add_tokens(0, 3, 4);
    s->begin_step(step.inputs());
    const Tensor x = s.input(1, 8, {1, 0, 0, 1, 1, 2, 3, 4});
    s->rope(x, *rope, 2, 4);
    return s.read(x);
}

TEST(ReferenceGolden, RopeTwoHeadsAtPosition3) {
    const double c3 = -0.9899924966004454, s3 = 0.1411200080598672;  // cos 3, sin 3
    const double c = 0.955336489125606, s = 0.29552020666133955;     // cos 0.3, sin 0.3
    // Normal: (x0, x1) and (x2, x3) rotate.
    expect_values(rope_at_3(false), {c3, s3, -s, c, c3 - 2 * s3, s3 + 2 * c3, 3 * c - 4 * s, 3 * s + 4 * c});
    // NeoX: (x0, x2) and (x1, x3) rotate.
    expect_values(rope_at_3(true), {c3, -s, s3, c, c3 - 3 * s3, 2 * c - 4 * s, s3 + 3 * c3, 2 * s + 4 * c});
}

// One sequence of two tokens whose blocks (block size 1) are 1 then 0; K = (1,0), (0,1) and
// V = (1,2), (3,4); two query heads share the one KV head.
std::vector<float> attention_over_two_keys(const AttentionParams& params) {
    Side s = reference();
    auto cache = s->create_kv_cache({1, 1, 2, 1, kv::KvDtype::f32}, 2);
    Step step;
    step.block_tables = {{1, 0}};
    step.add_tokens(0, 0, 2);
    s->begin_step(step.inputs());
    s->kv_write(*cache, 0, s.input(2, 2, {1, 0, 0, 1}), s.input(2, 2, {1, 2, 3, 4}));
    const Tensor q = s.input(2, 4, {5, 5, 5, 5, 1, 0, 0, 1}), out = s.tensor(2, 4);
    s->attention(*cache, 0, q, out, params);
    return s.read(out);
}

TEST(ReferenceGolden, AttentionOverTwoKeys) {
    // Token 0 sees only key 0: V0. Token 1, head 0: scores (1, 0), p0 = e / (e + 1) = 0.7310586,
    // out = p0 V0 + (1 - p0) V1; head 1: scores (0, 1), the weights swap.
    const double p = 0.7310585786300049;
    expect_values(attention_over_two_keys({2, 1.0f, 0, 0.0f}),
                  {1, 2, 1, 2, 3 - 2 * p, 4 - 2 * p, 1 + 2 * p, 2 + 2 * p});
    // Softcap 0.5: score 1 becomes 0.5 tanh(2) = 0.4820138, so p0 = 1 / (1 + e^-0.4820138).
    const std::vector<float> capped = attention_over_two_keys({2, 1.0f, 0, 0.5f});
    EXPECT_NEAR(capped[4], 1.7635534218575992, kTol);
    EXPECT_NEAR(capped[5], 2.7635534218575994, kTol);
    // A window of 1: each token sees only itself.
    expect_values(attention_over_two_keys({2, 1.0f, 1, 0.0f}), {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST(ReferenceGolden, KvCacheStoresTheDtypesRounding) {
    for (auto [dtype, third] : {std::pair{kv::KvDtype::f32, double(1.0f / 3)}, {kv::KvDtype::f16, 0.333251953125},
                                {kv::KvDtype::bf16, 0.333984375}}) {
        Side s = reference();
        auto cache = s->create_kv_cache({1, 1, 1, 1, dtype}, 1);
        Step step;
        step.block_tables = {{0}};
        step.add_tokens(0, 0, 1);
        s->begin_step(step.inputs());
        s->kv_write(*cache, 0, s.input(1, 1, {1.0f / 3}), s.input(1, 1, {-1.0f / 3}));
        float k = 0, v = 0;
        cache->read_k(0, 0, 0, &k);
        cache->read_v(0, 0, 0, &v);
        EXPECT_EQ(k, float(third)) << kv::kv_dtype_name(dtype);
        EXPECT_EQ(v, -float(third)) << kv::kv_dtype_name(dtype);
    }
}

TEST(ReferenceGolden, ShapeErrorsNameTheOp) {
    Side s = reference();
    const float w[] = {1, 2, 3, 4, 5, 6};
    auto weight = s->upload_weight({{gguf::GgmlType::F32, w, 2, 3, "w"}}, WeightUse::matmul);
    const Tensor x = s.tensor(1, 4), y = s.tensor(1, 2);
    EXPECT_THROW(s->matmul(*weight, x, std::span(&y, 1)), Error);
    EXPECT_THROW(s->embed(*weight, y), Error);  // uploaded for matmul only
    EXPECT_THROW(s->upload_rope({4, false, {1.0}}), Error);
    EXPECT_THROW(s->read(Tensor{nullptr, 1, 1}, nullptr), Error);  // not in the arena
}

TEST(BackendRegistry, NamesAndUnknownNames) {
    const auto names = backend_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
    EXPECT_EQ(make_backend("reference")->name(), "reference");
    try {
        make_backend("abacus");
        ADD_FAILURE() << "an unknown backend was made";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown backend 'abacus' (choices: "), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("reference"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::backend
