// The backend conformance suite (conformance.h): the encoders' optional ops (backend/op.h) —
// LayerNorm with bias, the erf GELU, learned position embeddings — against the reference, and their
// batch invariance. Every backend here has them (cpu, vulkan); one that declared none (supports) would
// be skipped with a message naming the op, and the model layer refuses encoder models on it at load.
// (Non-causal attention is in conformance_kv_attention_test.cpp with the other attention cases.)
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using gguf::GgmlType;
using namespace testing;

#define SKIP_WITHOUT(op)                                                                         \
    if (!test->supports(op)) GTEST_SKIP() << GetParam() << ": declares no " << op_name(op)

TEST_P(Conformance, LayerNormInPlaceAndNot) {
    SKIP_WITHOUT(OpKind::layer_norm);
    std::mt19937 rng(31);
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 300, rng);
        const bool in_place = trial % 2 == 0;
        const float eps = trial % 4 < 2 ? 1e-12f : 1e-5f;
        // An offset row mean (BERT's residual stream drifts) that the norm must remove first.
        std::vector<float> x = random_values(n * cols, rng, 2.0f);
        for (auto& v : x) v += 5.0f;
        const std::vector<float> w = random_values(cols, rng), b = random_values(cols, rng);
        auto [got, want] = both([&](Side& s) {
            const Tensor in = s.input(n, cols, x), out = in_place ? in : s.tensor(n, cols);
            s->layer_norm(in, *s->upload_vector(w), *s->upload_vector(b), eps, out);
            return s.read(out);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << n << "x" << cols << (in_place ? " in place" : "");
    }
}

TEST_P(Conformance, Gelu) {
    SKIP_WITHOUT(OpKind::gelu);
    std::mt19937 rng(32);
    for (int trial = 0; trial < 6; ++trial) {
        const int64_t n = uniform(1, 37, rng), cols = uniform(1, 700, rng);
        const std::vector<float> x = random_values(n * cols, rng, trial < 3 ? 1.0f : 5.0f);
        auto [got, want] = both([&](Side& s) {
            const Tensor t = s.input(n, cols, x);
            s->gelu(t);
            return s.read(t);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << n << "x" << cols;
    }
    // The negative tail keeps its digits (erfc computed directly, no 1 + erf cancellation): gelu(-5)
    // ~ -1.43e-6 within a percent (the CPU's erfc approximation is 0.2 % off there, ops.h).
    auto [got, want] = both([&](Side& s) {
        const Tensor t = s.input(1, 3, {-5.0f, -4.0f, -3.0f});
        s->gelu(t);
        return s.read(t);
    });
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-2 * std::fabs(want[i])) << i;
}

TEST_P(Conformance, PositionEmbedding) {
    SKIP_WITHOUT(OpKind::position_embedding);
    std::mt19937 rng(33);
    for (GgmlType type : kWeightTypes) {
        const int64_t rows = uniform(40, 80, rng), cols = random_cols(type, rng);
        const HostMatrix table = random_matrix(type, rows, cols, rng, "position_embd.weight");
        Step step = make_tables({uniform(1, 37, rng), 40}, 16, rng);
        step.add_tokens(0, 0, int32_t(step.block_tables[0].size() * 16 < 37 ? step.block_tables[0].size() * 16 : 37));
        step.add_tokens(1, 3, 40);
        const std::vector<float> x = random_values(step.n_tokens() * cols, rng);
        auto [got, want] = both([&](Side& s) {
            auto weight = s->upload_weight({table.source()}, WeightUse::embedding);
            s->begin_step(step.inputs());
            const Tensor t = s.input(step.n_tokens(), cols, x);
            s->add_position_embedding(*weight, t);
            return s.read(t);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << type_name(type) << " " << rows << "x" << cols;
    }
}

// Each row of the encoders' ops is the same, bitwise, computed alone or among others.
TEST_P(Contract, EncoderOpsAreBatchInvariant) {
    SKIP_WITHOUT(OpKind::layer_norm);
    SKIP_WITHOUT(OpKind::gelu);
    std::mt19937 rng(34);
    const int64_t n = 23, cols = 301;
    const std::vector<float> x = random_values(n * cols, rng, 3.0f), w = random_values(cols, rng), b = random_values(cols, rng);
    auto run = [&](int64_t first, int64_t rows) {
        test.reset();
        const Tensor t = test.input(rows, cols, {x.begin() + first * cols, x.begin() + (first + rows) * cols});
        test->layer_norm(t, *test->upload_vector(w), *test->upload_vector(b), 1e-12f, t);
        test->gelu(t);
        return test.read(t);
    };
    const std::vector<float> all = run(0, n);
    for (int64_t r : {int64_t(0), int64_t(7), n - 1}) {
        const std::vector<float> alone = run(r, 1);
        EXPECT_TRUE(bitwise(alone, {all.begin() + r * cols, all.begin() + (r + 1) * cols})) << "row " << r;
    }
}

}  // namespace
}  // namespace pagoda::backend::conformance
