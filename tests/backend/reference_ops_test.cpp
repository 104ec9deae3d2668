// The reference backend, the suite's oracle, against small cases computed by hand: one or a few per
// op, with inputs chosen so the answer has a closed form (rotations by pi/2, softmax over logs,
// tanh(ln 3 / 2) = 1/2, quantised blocks whose codes sum to known values). The conformance suite
// compares every other backend with this one, so this file is what keeps the oracle itself honest.
// Tolerances: the reference computes in double and stores f32, so 1e-6 relative to the largest
// expected value; KV element types round the way their formats define (exact values below).
#include <cmath>
#include <gtest/gtest.h>
#include <numbers>

#include "backend/backend_test_util.h"
#include "core/error.h"
#include "core/half.h"

namespace pagoda::backend {
namespace {

using gguf::GgmlType;
using testing::close;
using testing::HostMatrix;
using testing::make_tables;
using testing::Side;
using testing::Step;

constexpr double kTol = 1e-6;

Side reference() { return Side(make_backend("reference")); }

HostMatrix float_matrix(GgmlType type, int64_t rows, int64_t cols, const std::vector<float>& values) {
    HostMatrix m{type, rows, cols, "w", {}};
    for (float v : values) {
        if (type == GgmlType::F32) {
            const auto* b = reinterpret_cast<const uint8_t*>(&v);
            m.bytes.insert(m.bytes.end(), b, b + 4);
        } else {
            const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
            m.bytes.push_back(uint8_t(h & 0xff));
            m.bytes.push_back(uint8_t(h >> 8));
        }
    }
    return m;
}

std::vector<float> matmul(Side& s, const HostMatrix& w, int64_t n, const std::vector<float>& x) {
    auto weight = s->upload_weight({w.source()}, WeightUse::matmul);
    const Tensor out = s.tensor(n, w.rows);
    s->matmul(*weight, s.input(n, w.cols, x), std::span(&out, 1));
    return s.read(out);
}

// A step of one sequence at positions 0..n-1 (block size 4).
Step one_sequence(int32_t n) {
    std::mt19937 rng(1);
    Step step = make_tables({n}, 4, rng);
    step.add_tokens(0, 0, n);
    return step;
}

TEST(ReferenceOps, MatmulOfFloatTypes) {
    // W = [[1, 2, 3], [-1, 0, 0.5]] (exact in f16 and bf16); x = [1, 1, 1] and [2, 0, -2].
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        Side s = reference();
        const HostMatrix w = float_matrix(type, 2, 3, {1, 2, 3, -1, 0, 0.5f});
        EXPECT_TRUE(close(matmul(s, w, 2, {1, 1, 1, 2, 0, -2}), {6, -0.5f, -4, -3}, kTol)) << gguf::type_name(uint32_t(type));
    }
}

TEST(ReferenceOps, MatmulOfAQ8_0Block) {
    // One block: scale 0.5 (f16 0x3800), codes j - 16 for j = 0..31, so values 0.5 (j - 16).
    HostMatrix w{GgmlType::Q8_0, 1, 32, "w", {0x00, 0x38}};
    for (int j = 0; j < 32; ++j) w.bytes.push_back(uint8_t(int8_t(j - 16)));
    std::vector<float> x(64, 0.0f);
    for (int j = 0; j < 32; ++j) x[size_t(j)] = 1.0f;  // token 0: the sum, 0.5 (496 - 512) = -8
    x[32 + 31] = 1.0f;                                  // token 1: element 31, 0.5 * 15
    Side s = reference();
    EXPECT_TRUE(close(matmul(s, w, 2, x), {-8.0f, 7.5f}, kTol));
}

TEST(ReferenceOps, MatmulOfAQ4_0Block) {
    // Scale 2 (f16 0x4000); byte j holds element j in its low nibble and element j + 16 in its high
    // one, each minus 8: bytes j | (15 - j) << 4 give elements j - 8 and 7 - j.
    HostMatrix w{GgmlType::Q4_0, 1, 32, "w", {0x00, 0x40}};
    for (int j = 0; j < 16; ++j) w.bytes.push_back(uint8_t(j | (15 - j) << 4));
    std::vector<float> x(96, 0.0f);
    for (int j = 0; j < 32; ++j) x[size_t(j)] = 1.0f;  // the sum: 2 (-8 + -8) = -32
    x[32 + 16] = 1.0f;                                  // element 16: 2 * 7
    x[64 + 0] = 1.0f;                                   // element 0: 2 * -8
    Side s = reference();
    EXPECT_TRUE(close(matmul(s, w, 3, x), {-32.0f, 14.0f, -16.0f}, kTol));
}

TEST(ReferenceOps, EmbedPicksTheTokensRows) {
    Side s = reference();
    const HostMatrix table = float_matrix(GgmlType::F32, 3, 2, {1, 2, 3, 4, 5, 6});
    auto weight = s->upload_weight({table.source()}, WeightUse::embedding);
    Step step = one_sequence(3);
    step.tokens = {2, 0, 2};
    s->begin_step(step.inputs());
    const Tensor out = s.tensor(3, 2);
    s->embed(*weight, out);
    EXPECT_EQ(s.read(out), (std::vector<float>{5, 6, 1, 2, 5, 6}));
}

TEST(ReferenceOps, RmsNorm) {
    // Row [3, 4]: mean square 12.5; row [1, 1]: 1. Weights [1, 2].
    Side s = reference();
    const float eps = 1e-5f;
    const Tensor x = s.input(2, 2, {3, 4, 1, 1}), out = s.tensor(2, 2);
    s->rms_norm(x, *s->upload_vector(std::vector<float>{1, 2}), eps, out);
    const double a = 1 / std::sqrt(12.5 + double(eps)), b = 1 / std::sqrt(1 + double(eps));
    EXPECT_TRUE(close(s.read(out), {float(3 * a), float(8 * a), float(b), float(2 * b)}, kTol));
}

TEST(ReferenceOps, AddThenAddBias) {
    Side s = reference();
    const Tensor y = s.input(2, 2, {1, 2, 3, 4});
    s->add(y, s.input(2, 2, {10, 20, 30, 40}));
    s->add_bias(y, *s->upload_vector(std::vector<float>{0.5f, -1}));
    EXPECT_EQ(s.read(y), (std::vector<float>{11.5f, 21, 33.5f, 43}));
}

TEST(ReferenceOps, RopeRotatesEachPairByPositionTimesFrequency) {
    // Head size 4, frequencies pi/2 and pi. Position 0 is the identity; at position 1 the first
    // pair turns a quarter, the second a half: (a, b) -> (-b, a) and (a, b) -> (-a, -b).
    // Normal RoPE pairs (0, 1), (2, 3); NeoX pairs (0, 2), (1, 3).
    for (bool neox : {false, true}) {
        Side s = reference();
        auto rope = s->upload_rope({4, neox, {std::numbers::pi / 2, std::numbers::pi}});
        const Step step = one_sequence(2);
        s->begin_step(step.inputs());
        const Tensor x = s.input(2, 4, {1, 2, 3, 4, 1, 2, 3, 4});
        s->rope(x, *rope, 1, 4);
        const std::vector<float> want = neox ? std::vector<float>{1, 2, 3, 4, -3, -2, 1, -4}
                                             : std::vector<float>{1, 2, 3, 4, -2, 1, -3, -4};
        EXPECT_TRUE(close(s.read(x), want, kTol)) << (neox ? "neox" : "normal");
    }
}

TEST(ReferenceOps, GatedActivations) {
    // silu(g) = g / (1 + e^-g): silu(0) = 0, silu(ln 3) = 3/4 ln 3.
    // gelu (tanh form) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))): gelu(0) = 0.
    Side s = reference();
    const double ln3 = std::log(3.0);
    const Tensor silu_out = s.tensor(1, 2), gelu_out = s.tensor(1, 2);
    s->silu_mul(s.input(1, 2, {0, float(ln3)}), s.input(1, 2, {5, 4}), silu_out);
    EXPECT_TRUE(close(s.read(silu_out), {0, float(4 * 0.75 * double(float(ln3)))}, kTol));
    s->gelu_mul(s.input(1, 2, {0, 1}), s.input(1, 2, {7, 2}), gelu_out);
    const double gelu1 = 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * 1.044715));
    EXPECT_TRUE(close(s.read(gelu_out), {0, float(2 * gelu1)}, kTol));
}

TEST(ReferenceOps, SoftmaxOfLogarithms) {
    // softmax(ln 1, ln 2, ln 3, ln 4) = (1, 2, 3, 4) / 10; shifted by 1000 it must not overflow.
    Side s = reference();
    std::vector<float> x;
    for (double shift : {0.0, 1000.0})
        for (int k = 1; k <= 4; ++k) x.push_back(float(shift + std::log(double(k))));
    const Tensor t = s.input(2, 4, x);
    s->softmax(t);
    EXPECT_TRUE(close(s.read(t), {0.1f, 0.2f, 0.3f, 0.4f, 0.1f, 0.2f, 0.3f, 0.4f}, 2e-4));  // ln k + 1000 in f32: ulp 6e-5
}

TEST(ReferenceOps, ScaleAndSoftcap) {
    // softcap 2: 2 tanh(x / 2); at x = 2 atanh(1/2) = ln 3 it is 1.
    Side s = reference();
    const Tensor t = s.input(1, 2, {1, -2});
    s->scale(t, 3);
    EXPECT_EQ(s.read(t), (std::vector<float>{3, -6}));
    const Tensor c = s.input(1, 2, {0, float(std::log(3.0))});
    s->softcap(c, 2);
    EXPECT_TRUE(close(s.read(c), {0, 1}, kTol));
}

// Llama 4's attention temperature, length 8, beta 1/4: positions 0..7 keep their rows (ln 1 = 0),
// 8..15 take 1 + ln(2)/4, 16..23 1 + ln(3)/4 and 24..26 1 + ln(4)/4 = 1 + ln(2)/2: the floor steps
// exactly at each multiple of the length, as llama.cpp's mistral3 input computes it.
TEST(ReferenceOps, AttnTemperatureStepsAtEachMultipleOfTheLength) {
    Side s = reference();
    const int32_t n = 27;
    const Step step = one_sequence(n);
    s->begin_step(step.inputs());
    std::vector<float> x;
    for (int32_t p = 0; p < n; ++p) x.insert(x.end(), {1.0f, -2.0f, 0.5f});
    const Tensor t = s.input(n, 3, x);
    s->attn_temperature(t, {.beta = 0.25f, .length = 8});
    const std::vector<float> got = s.read(t);
    const double ln2 = std::log(2.0), ln3 = std::log(3.0);
    for (int32_t p = 0; p < n; ++p) {
        const double f = p < 8 ? 1 : p < 16 ? 1 + ln2 / 4 : p < 24 ? 1 + ln3 / 4 : 1 + ln2 / 2;
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[size_t(p * 3 + c)], x[size_t(p * 3 + c)] * f, 1e-6) << p << " " << c;
    }
    EXPECT_FLOAT_EQ(got[7 * 3], 1.0f);                         // the last position before the first step
    EXPECT_FLOAT_EQ(got[8 * 3], float(1 + 0.25 * ln2));        // the first one after it
}

// One sequence of two tokens, one KV head of size 2 shared by two query heads (GQA). Keys
// k0 = (0, 0), k1 = (ln 3, 0); values v0 = (1, 0), v1 = (0, 1). Head 0 asks q = (1, 0), scale 1:
// scores 0 and ln 3, weights 1/4 and 3/4. Head 1 asks q = (0, 0): weights 1/2, 1/2.
std::vector<float> attend(const AttentionParams& params) {
    Side s = reference();
    const kv::KvLayout layout{1, 1, 2, 4, kv::KvDtype::f32};
    auto cache = s->create_kv_cache(layout, 4);
    const Step step = one_sequence(2);
    s->begin_step(step.inputs());
    const float ln3 = float(std::log(3.0));
    s->kv_write(*cache, 0, s.input(2, 2, {0, 0, ln3, 0}), s.input(2, 2, {1, 0, 0, 1}));
    const Tensor out = s.tensor(2, 4);
    s->attention(*cache, 0, s.input(2, 4, {1, 0, 0, 0, 1, 0, 0, 0}), out, params);
    return s.read(out);
}

TEST(ReferenceOps, AttentionIsCausalWithGqa) {
    // Token 0 sees key 0 only; token 1 both.
    EXPECT_TRUE(close(attend({2, 1.0f, 0, 0.0f}), {1, 0, 1, 0, 0.25f, 0.75f, 0.5f, 0.5f}, kTol));
}

TEST(ReferenceOps, AttentionSlidingWindowAndSoftcap) {
    // A window of 1: each token sees itself only.
    EXPECT_TRUE(close(attend({2, 1.0f, 1, 0.0f}), {1, 0, 1, 0, 0, 1, 0, 1}, kTol));
    // Softcap 2: ln 3 becomes 2 tanh(ln 3 / 2) = 1, so head 0's weights are 1/(1+e) and e/(1+e).
    const float e = float(std::numbers::e);
    EXPECT_TRUE(close(attend({2, 1.0f, 0, 2.0f}), {1, 0, 1, 0, 1 / (1 + e), e / (1 + e), 0.5f, 0.5f}, kTol));
}

TEST(ReferenceOps, NonCausalAttentionSeesTheWholeSequence) {
    // Token 0 now sees key 1 too: both tokens get token 1's causal answer.
    EXPECT_TRUE(close(attend({2, 1.0f, 0, 0.0f, false}), {0.25f, 0.75f, 0.5f, 0.5f, 0.25f, 0.75f, 0.5f, 0.5f}, kTol));
}

TEST(ReferenceOps, LayerNormWithBias) {
    // Row [1, 3]: mean 2, variance 1, so (x - mean) / sqrt(1 + eps) = [-1, 1] / sqrt(1 + eps); row
    // [4, 4] has no spread and gives the bias alone. Weights [2, 3], biases [0.5, -1].
    Side s = reference();
    const float eps = 1e-5f;
    const Tensor x = s.input(2, 2, {1, 3, 4, 4}), out = s.tensor(2, 2);
    s->layer_norm(x, *s->upload_vector(std::vector<float>{2, 3}), *s->upload_vector(std::vector<float>{0.5f, -1}), eps, out);
    const double a = 1 / std::sqrt(1 + double(eps));
    EXPECT_TRUE(close(s.read(out), {float(-2 * a + 0.5), float(3 * a - 1), 0.5f, -1}, kTol));
}

TEST(ReferenceOps, GeluIsTheErfForm) {
    // gelu(x) = x/2 (1 + erf(x / sqrt 2)): at +-sqrt 2 that is +-sqrt(2)/2 (1 +- erf 1), erf 1 =
    // 0.8427007929497149; the tanh form would give 1.2533 / -0.1609 there, not these.
    Side s = reference();
    const double r2 = std::numbers::sqrt2, erf1 = 0.8427007929497149;
    const Tensor x = s.input(1, 3, {0, float(r2), float(-r2)});
    s->gelu(x);
    EXPECT_TRUE(close(s.read(x), {0, float(r2 / 2 * (1 + erf1)), float(-r2 / 2 * (1 - erf1))}, kTol));
}

TEST(ReferenceOps, PositionEmbeddingAddsEachPositionsRow) {
    Side s = reference();
    const HostMatrix table = float_matrix(GgmlType::F32, 3, 2, {1, 2, 3, 4, 5, 6});
    auto weight = s->upload_weight({table.source()}, WeightUse::embedding);
    Step step = one_sequence(3);
    s->begin_step(step.inputs());
    const Tensor x = s.input(3, 2, {10, 10, 20, 20, 30, 30});
    s->add_position_embedding(*weight, x);
    EXPECT_EQ(s.read(x), (std::vector<float>{11, 12, 23, 24, 35, 36}));
    step = one_sequence(4);  // position 3 is past the table
    s->begin_step(step.inputs());
    EXPECT_THROW(s->add_position_embedding(*weight, s.input(4, 2, std::vector<float>(8, 0))), Error);
}

TEST(ReferenceOps, KvWriteRoundsAsTheFormatSays) {
    // 1/3 stored as f32 reads back as itself; as f16 0x3555 = 0.333251953125; as bf16 0x3EAB
    // = 0.333984375 (round to nearest even).
    const std::pair<kv::KvDtype, float> cases[] = {
        {kv::KvDtype::f32, 1.0f / 3}, {kv::KvDtype::f16, 0.333251953125f}, {kv::KvDtype::bf16, 0.333984375f}};
    for (const auto& [dtype, want] : cases) {
        Side s = reference();
        auto cache = s->create_kv_cache({1, 1, 2, 4, dtype}, 4);
        const Step step = one_sequence(1);
        s->begin_step(step.inputs());
        s->kv_write(*cache, 0, s.input(1, 2, {1.0f / 3, -2}), s.input(1, 2, {-1.0f / 3, 0.5f}));
        float k[2], v[2];
        cache->read_k(0, step.slots[0], 0, k);
        cache->read_v(0, step.slots[0], 0, v);
        EXPECT_EQ(k[0], want) << kv::kv_dtype_name(dtype);
        EXPECT_EQ(k[1], -2.0f) << kv::kv_dtype_name(dtype);
        EXPECT_EQ(v[0], -want) << kv::kv_dtype_name(dtype);
        EXPECT_EQ(v[1], 0.5f) << kv::kv_dtype_name(dtype);
    }
}

TEST(ReferenceOps, GatherLogitRowsTakesEachSequencesLastToken) {
    Side s = reference();
    std::mt19937 rng(2);
    Step step = make_tables({3, 2}, 4, rng);
    step.add_tokens(0, 0, 3);
    step.add_tokens(1, 0, 2);
    s->begin_step(step.inputs());
    const Tensor out = s.tensor(2, 2);
    s->gather_logit_rows(s.input(5, 2, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4}), out);
    EXPECT_EQ(s.read(out), (std::vector<float>{2, 2, 4, 4}));
}

}  // namespace
}  // namespace pagoda::backend
