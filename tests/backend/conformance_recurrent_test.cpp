// The backend conformance suite (conformance.h): the recurrent ops of gated DeltaNet layers
// (backend.h: CausalConv1d, GatedDeltaRule) against the reference's double-precision recurrence:
// outputs and updated states over several sequences whose tokens interleave in one call, random
// starting states, odd widths, value heads over fewer key heads. Contract: the conv in chunks and one
// token at a time give bitwise the same outputs and states, the delta rule the same to float rounding
// (a backend may run a sequence's tokens of one call in the chunkwise-parallel form); a sequence's
// results never depend on the other sequences of the call (batch invariance, bitwise); bad shapes and
// state rows are refused by name. Also
// sigmoid_mul, the full-attention layers' output gate.
// A backend that declares neither op (supports) is skipped naming it; the model layer refuses qwen35 there.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

using namespace testing;

// Recurrences compound f32 rounding over the tokens of a sequence: a few ulps per token.
constexpr double kRecurrentTolerance = 1e-4;

// Per token, the state row of its sequence: `n_seqs` sequences, their tokens shuffled together
// (each sequence's own tokens stay in order, as a step lays them out).
std::vector<int32_t> interleaved_rows(int64_t tokens, int32_t n_seqs, std::mt19937& rng) {
    std::vector<int32_t> rows(static_cast<size_t>(tokens));
    for (auto& r : rows) r = uniform(0, n_seqs - 1, rng);
    return rows;
}

struct ConvCase {
    int64_t tokens = 0, channels = 0;
    int32_t slots = 0;
    CausalConv1d op;
    std::vector<int32_t> rows;
    std::vector<float> weight, x, state;
};

ConvCase random_conv(std::mt19937& rng, int trial) {
    ConvCase c;
    c.tokens = uniform(1, 29, rng);
    c.channels = uniform(1, 37, rng);
    c.slots = uniform(1, 4, rng);
    c.op.kernel = uniform(2, 5, rng);
    c.op.silu = trial % 2 == 0;
    c.rows = interleaved_rows(c.tokens, c.slots, rng);
    c.weight = random_values(c.channels * c.op.kernel, rng, 0.5f);
    c.x = random_values(c.tokens * c.channels, rng);
    c.state = random_values(c.slots * (c.op.kernel - 1) * c.channels, rng);
    return c;
}

// Runs the conv on `s` from c's starting state in calls of at most `chunk` tokens: {out, state}.
std::pair<std::vector<float>, std::vector<float>> run_conv(Side& s, const ConvCase& c, int64_t chunk) {
    const auto weight = s->upload_vector(c.weight);
    const Tensor state = s.input(c.slots, (c.op.kernel - 1) * c.channels, c.state);
    std::vector<float> out;
    for (int64_t at = 0; at < c.tokens; at += chunk) {
        const int64_t n = std::min(chunk, c.tokens - at);
        const std::vector<float> x(c.x.begin() + at * c.channels, c.x.begin() + (at + n) * c.channels);
        CausalConv1d op = c.op;
        op.weight = weight.get();
        op.state_rows = std::span(c.rows).subspan(size_t(at), size_t(n));
        const Tensor in = s.input(n, c.channels, x), o = s.tensor(n, c.channels);
        s->causal_conv1d(op, in, state, o);
        const std::vector<float> part = s.read(o);
        out.insert(out.end(), part.begin(), part.end());
    }
    return {out, s.read(state)};
}

struct DeltaCase {
    int64_t tokens = 0;
    int32_t slots = 0;
    GatedDeltaRule op;
    std::vector<int32_t> rows;
    std::vector<float> q, k, v, g, beta, state;
};

DeltaCase random_delta(std::mt19937& rng) {
    DeltaCase c;
    c.tokens = uniform(1, 23, rng);
    c.slots = uniform(1, 3, rng);
    c.op.n_k_heads = uniform(1, 2, rng);
    c.op.n_v_heads = c.op.n_k_heads * uniform(1, 3, rng);
    c.op.head_dim = std::array{3, 8, 17, 32}[size_t(uniform(0, 3, rng))];
    c.op.scale = 1.0f / std::sqrt(float(c.op.head_dim));
    c.op.l2_eps = 1e-6f;
    c.rows = interleaved_rows(c.tokens, c.slots, rng);
    const int64_t dk = c.op.n_k_heads * c.op.head_dim, dv = c.op.n_v_heads * c.op.head_dim;
    c.q = random_values(c.tokens * dk, rng);
    c.k = random_values(c.tokens * dk, rng);
    c.v = random_values(c.tokens * dv, rng);
    std::uniform_real_distribution<float> decay(-2.0f, 0.0f), unit(0.02f, 0.98f);
    for (int64_t i = 0; i < c.tokens * c.op.n_v_heads; ++i) {
        c.g.push_back(decay(rng));
        c.beta.push_back(unit(rng));
    }
    c.state = random_values(c.slots * c.op.n_v_heads * c.op.head_dim * c.op.head_dim, rng, 0.3f);
    return c;
}

std::vector<float> rows_of(const std::vector<float>& all, int64_t cols, int64_t at, int64_t n) {
    return {all.begin() + at * cols, all.begin() + (at + n) * cols};
}

std::pair<std::vector<float>, std::vector<float>> run_delta(Side& s, const DeltaCase& c, int64_t chunk) {
    const int64_t dk = c.op.n_k_heads * c.op.head_dim, dv = c.op.n_v_heads * c.op.head_dim, hv = c.op.n_v_heads;
    const Tensor state = s.input(c.slots, dv * c.op.head_dim, c.state);
    std::vector<float> out;
    for (int64_t at = 0; at < c.tokens; at += chunk) {
        const int64_t n = std::min(chunk, c.tokens - at);
        GatedDeltaRule op = c.op;
        op.state_rows = std::span(c.rows).subspan(size_t(at), size_t(n));
        const Tensor q = s.input(n, dk, rows_of(c.q, dk, at, n)), k = s.input(n, dk, rows_of(c.k, dk, at, n));
        const Tensor v = s.input(n, dv, rows_of(c.v, dv, at, n)), o = s.tensor(n, dv);
        const Tensor g = s.input(n, hv, rows_of(c.g, hv, at, n)), beta = s.input(n, hv, rows_of(c.beta, hv, at, n));
        s->gated_delta_rule(op, q, k, v, g, beta, state, o);
        const std::vector<float> part = s.read(o);
        out.insert(out.end(), part.begin(), part.end());
    }
    return {out, s.read(state)};
}

bool has_recurrent_ops(Backend& b) {
    return b.supports(OpKind::causal_conv1d) && b.supports(OpKind::gated_delta_rule);
}

TEST_P(Conformance, CausalConv1dMatchesTheReference) {
    if (!has_recurrent_ops(*test)) GTEST_SKIP() << GetParam() << ": declares no recurrent ops";
    std::mt19937 rng(61);
    for (int trial = 0; trial < 24; ++trial) {
        const ConvCase c = random_conv(rng, trial);
        auto [got, want] = both([&](Side& s) { return run_conv(s, c, c.tokens); });
        EXPECT_TRUE(close(got.first, want.first, kOpTolerance)) << "trial " << trial << ": out";
        EXPECT_TRUE(bitwise(got.second, want.second)) << "trial " << trial << ": the state holds the inputs";
    }
}

TEST_P(Conformance, GatedDeltaRuleMatchesTheReference) {
    if (!has_recurrent_ops(*test)) GTEST_SKIP() << GetParam() << ": declares no recurrent ops";
    std::mt19937 rng(62);
    for (int trial = 0; trial < 24; ++trial) {
        const DeltaCase c = random_delta(rng);
        auto [got, want] = both([&](Side& s) { return run_delta(s, c, c.tokens); });
        EXPECT_TRUE(close(got.first, want.first, kRecurrentTolerance))
            << "trial " << trial << ": " << c.tokens << " tokens, heads " << c.op.n_v_heads << "/" << c.op.n_k_heads
            << " of " << c.op.head_dim;
        EXPECT_TRUE(close(got.second, want.second, kRecurrentTolerance)) << "trial " << trial << ": state";
    }
}

TEST_P(Contract, RecurrentOpsInChunksAgreeWithOneTokenAtATime) {
    if (!has_recurrent_ops(*test)) GTEST_SKIP() << GetParam() << ": declares no recurrent ops";
    std::mt19937 rng(63);
    for (int trial = 0; trial < 8; ++trial) {
        const ConvCase conv = random_conv(rng, trial);
        const DeltaCase delta = random_delta(rng);
        for (int64_t chunk : {int64_t(1), int64_t(3)}) {
            test.reset();
            const auto whole = run_conv(test, conv, conv.tokens), split = run_conv(test, conv, chunk);
            EXPECT_TRUE(bitwise(split.first, whole.first)) << "conv trial " << trial << ", chunks of " << chunk;
            EXPECT_TRUE(bitwise(split.second, whole.second)) << "conv state, trial " << trial;
            test.reset();
            const auto d_whole = run_delta(test, delta, delta.tokens), d_split = run_delta(test, delta, chunk);
            EXPECT_TRUE(close(d_split.first, d_whole.first, kRecurrentTolerance))
                << "delta trial " << trial << ", chunks of " << chunk;
            EXPECT_TRUE(close(d_split.second, d_whole.second, kRecurrentTolerance)) << "delta state, trial " << trial;
        }
    }
}

// Sequence 0's outputs and state row, run alone and interleaved with other sequences.
TEST_P(Contract, RecurrentOpsKeepSequencesApart) {
    if (!has_recurrent_ops(*test)) GTEST_SKIP() << GetParam() << ": declares no recurrent ops";
    std::mt19937 rng(64);
    for (int trial = 0; trial < 8; ++trial) {
        DeltaCase mixed = random_delta(rng);
        mixed.slots = 3;
        mixed.state = random_values(3 * mixed.op.n_v_heads * mixed.op.head_dim * mixed.op.head_dim, rng, 0.3f);
        mixed.rows = interleaved_rows(mixed.tokens, 3, rng);
        mixed.rows[0] = 0;
        // Alone: only sequence 0's tokens, same slot, same starting state.
        DeltaCase alone = mixed;
        const int64_t dk = mixed.op.n_k_heads * mixed.op.head_dim, dv = mixed.op.n_v_heads * mixed.op.head_dim;
        const int64_t hv = mixed.op.n_v_heads;
        alone.rows.clear();
        alone.q.clear(), alone.k.clear(), alone.v.clear(), alone.g.clear(), alone.beta.clear();
        std::vector<size_t> mine;
        for (size_t t = 0; t < mixed.rows.size(); ++t) {
            if (mixed.rows[t] != 0) continue;
            mine.push_back(t);
            alone.rows.push_back(0);
            auto take = [&](std::vector<float>& to, const std::vector<float>& from, int64_t cols) {
                const auto row = rows_of(from, cols, int64_t(t), 1);
                to.insert(to.end(), row.begin(), row.end());
            };
            take(alone.q, mixed.q, dk), take(alone.k, mixed.k, dk), take(alone.v, mixed.v, dv);
            take(alone.g, mixed.g, hv), take(alone.beta, mixed.beta, hv);
        }
        alone.tokens = int64_t(mine.size());
        test.reset();
        const auto [mixed_out, mixed_state] = run_delta(test, mixed, mixed.tokens);
        const auto [alone_out, alone_state] = run_delta(test, alone, alone.tokens);
        std::vector<float> picked;
        for (size_t t : mine) {
            const auto row = rows_of(mixed_out, dv, int64_t(t), 1);
            picked.insert(picked.end(), row.begin(), row.end());
        }
        EXPECT_TRUE(bitwise(alone_out, picked)) << "trial " << trial;
        const int64_t state_cols = dv * mixed.op.head_dim;
        EXPECT_TRUE(bitwise(rows_of(alone_state, state_cols, 0, 1), rows_of(mixed_state, state_cols, 0, 1)))
            << "trial " << trial << ": slot 0's state";
    }
}

TEST_P(Conformance, SigmoidMulMatchesTheReference) {
    if (!test->supports(OpKind::sigmoid_mul)) GTEST_SKIP() << GetParam() << ": declares no sigmoid_mul";
    std::mt19937 rng(65);
    for (int trial = 0; trial < 12; ++trial) {
        const int64_t rows = uniform(1, 37, rng), cols = uniform(1, 77, rng);
        const std::vector<float> gate = random_values(rows * cols, rng, 3.0f), up = random_values(rows * cols, rng);
        auto [got, want] = both([&](Side& s) {
            const Tensor g = s.input(rows, cols, gate), u = s.input(rows, cols, up), out = s.tensor(rows, cols);
            s->sigmoid_mul(g, u, out);
            s->sigmoid_mul(g, u, u);  // in place into up gives the same values
            return std::pair{s.read(out), s.read(u)};
        });
        EXPECT_TRUE(close(got.first, want.first, kOpTolerance)) << "trial " << trial;
        EXPECT_TRUE(bitwise(got.second, got.first)) << "trial " << trial << ": in place";
    }
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST_P(Contract, RecurrentOpsRefuseBadShapesAndStateRows) {
    if (!has_recurrent_ops(*test)) GTEST_SKIP() << GetParam() << ": declares no recurrent ops";
    test.reset();
    const auto weight = test->upload_vector(std::vector<float>(8 * 4, 0.5f));
    const Tensor x = test.tensor(2, 8), out = test.tensor(2, 8), state = test.tensor(2, 24);
    const std::vector<int32_t> rows{0, 1}, bad_rows{0, 2}, short_rows{0};
    CausalConv1d conv{weight.get(), 4, true, rows};
    EXPECT_EQ(error_of([&] { test->causal_conv1d(conv, x, state, out); }), "");
    conv.state_rows = bad_rows;
    EXPECT_NE(error_of([&] { test->causal_conv1d(conv, x, state, out); }).find("state row 2"), std::string::npos);
    conv.state_rows = short_rows;
    EXPECT_NE(error_of([&] { test->causal_conv1d(conv, x, state, out); }).find("1 state rows for 2 tokens"),
              std::string::npos);
    conv.state_rows = rows;
    conv.kernel = 3;
    EXPECT_NE(error_of([&] { test->causal_conv1d(conv, x, state, out); }).find("weights"), std::string::npos);

    GatedDeltaRule op{1, 2, 4, 0.5f, 1e-6f, rows};
    const Tensor q = test.tensor(2, 4), v = test.tensor(2, 8), g = test.tensor(2, 2), s = test.tensor(2, 32);
    EXPECT_EQ(error_of([&] { test->gated_delta_rule(op, q, q, v, g, g, s, out); }), "");
    EXPECT_NE(error_of([&] { test->gated_delta_rule(op, q, q, v, g, g, state, out); }).find("state has 24 columns"),
              std::string::npos);
    EXPECT_NE(error_of([&] { test->gated_delta_rule(op, v, q, v, g, g, s, out); }).find("q is 2 x 8"), std::string::npos);
    op.n_k_heads = 3;
    EXPECT_NE(error_of([&] { test->gated_delta_rule(op, q, q, v, g, g, s, out); }).find("multiple"), std::string::npos);
    op.n_k_heads = 1;
    op.state_rows = bad_rows;
    EXPECT_NE(error_of([&] { test->gated_delta_rule(op, q, q, v, g, g, s, out); }).find("state row 2"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::backend::conformance
