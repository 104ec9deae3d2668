// The CPU backend's chunked gated delta rule (ops/delta_chunk.h) on every ISA path against two
// oracles: its unfused twin, the token-by-token recurrence (the same function fed one row per call,
// so every slot holds one token), and the reference backend's double-precision recurrence. Outputs
// and final states agree within 1e-5 of their largest magnitude over run lengths 1, 2, C - 1, C,
// C + 1 and 3C + 5 (C = kDeltaChunk), several slots' rows interleaved, a state continued across
// calls, strong (g = -30) and no decay, beta 0 and 1, value heads over fewer key heads, head sizes
// from 3 to 128. Splitting the heads among callers (the backend's threads) changes nothing, bitwise.
#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "backend/backend_test_util.h"
#include "backend/cpu/ops/delta_chunk.h"
#include "backend/cpu/ops/recurrent.h"
#include "backend/reference/reference_recurrent.h"
#include "core/cpu_features.h"

namespace pagoda::backend::cpu {
namespace {

using testing::bitwise;
using testing::close;

constexpr int64_t C = detail::kDeltaChunk;
constexpr double kTol = 1e-5;

struct IsaGuard {
    Isa isa = active_isa();
    ~IsaGuard() { set_isa(isa); }
};

std::vector<Isa> isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (int(isa) <= int(best_supported_isa())) out.push_back(isa);
    return out;
}

enum class Decay { random, strong, none };
enum class Beta { random, zero, one };

struct Case {
    GatedDeltaRule op;
    int32_t slots = 1;
    std::vector<int32_t> rows;
    std::vector<float> q, k, v, g, beta, state;
    int64_t tokens() const { return int64_t(rows.size()); }
};

Case make_case(int32_t n_k, int32_t n_v, int32_t d, int32_t slots, std::vector<int32_t> rows, std::mt19937& rng,
               Decay decay = Decay::random, Beta beta = Beta::random) {
    Case c;
    c.op.n_k_heads = n_k, c.op.n_v_heads = n_v, c.op.head_dim = d;
    c.op.scale = 1.0f / std::sqrt(float(d));
    c.op.l2_eps = 1e-6f;
    c.slots = slots;
    c.rows = std::move(rows);
    const int64_t t = c.tokens();
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> log_decay(-2.0f, 0.0f), unit(0.02f, 0.98f);
    auto fill = [&](std::vector<float>& x, int64_t n, float scale) {
        for (int64_t i = 0; i < n; ++i) x.push_back(normal(rng) * scale);
    };
    fill(c.q, t * n_k * d, 1.0f), fill(c.k, t * n_k * d, 1.0f), fill(c.v, t * n_v * d, 1.0f);
    fill(c.state, int64_t(slots) * n_v * d * d, 0.3f);
    for (int64_t i = 0; i < t * n_v; ++i) {
        c.g.push_back(decay == Decay::strong ? -30.0f : decay == Decay::none ? 0.0f : log_decay(rng));
        c.beta.push_back(beta == Beta::zero ? 0.0f : beta == Beta::one ? 1.0f : unit(rng));
    }
    return c;
}

struct Result {
    std::vector<float> out, state;
};

// The CPU function over rows [at, at + n) of c, continuing `state`; heads [h0, h1).
void run_rows(const Case& c, int64_t at, int64_t n, std::vector<float>& state, std::vector<float>& out, int64_t h0,
              int64_t h1) {
    const int64_t dk = int64_t(c.op.n_k_heads) * c.op.head_dim, dv = int64_t(c.op.n_v_heads) * c.op.head_dim;
    GatedDeltaRule op = c.op;
    op.state_rows = std::span(c.rows).subspan(size_t(at), size_t(n));
    gated_delta_rule_f32(op, n, c.q.data() + at * dk, c.k.data() + at * dk, c.v.data() + at * dv,
                         c.g.data() + at * c.op.n_v_heads, c.beta.data() + at * c.op.n_v_heads, state.data(),
                         out.data() + at * dv, h0, h1);
}

// The rows in calls of `chunk` rows (chunk 1: the token-by-token recurrence).
Result run_cpu(const Case& c, int64_t chunk) {
    const int64_t dv = int64_t(c.op.n_v_heads) * c.op.head_dim;
    Result r{std::vector<float>(size_t(c.tokens() * dv)), c.state};
    for (int64_t at = 0; at < c.tokens(); at += chunk)
        run_rows(c, at, std::min(chunk, c.tokens() - at), r.state, r.out, 0, c.op.n_v_heads);
    return r;
}

Result run_reference(const Case& c) {
    auto wide = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const std::vector<double> q = wide(c.q), k = wide(c.k), v = wide(c.v), g = wide(c.g), b = wide(c.beta);
    std::vector<double> state = wide(c.state), out(size_t(c.tokens() * c.op.n_v_heads * c.op.head_dim));
    GatedDeltaRule op = c.op;
    op.state_rows = c.rows;
    reference::gated_delta_rule(op, c.tokens(), q.data(), k.data(), v.data(), g.data(), b.data(), state.data(),
                                out.data());
    return {std::vector<float>(out.begin(), out.end()), std::vector<float>(state.begin(), state.end())};
}

// The whole call (chunked for every slot with more than one row) against both oracles, per ISA.
void expect_agrees(const Case& c, const std::string& what) {
    IsaGuard guard;
    const Result want = run_reference(c);
    for (Isa isa : isas()) {
        set_isa(isa);
        const Result tokenwise = run_cpu(c, 1), whole = run_cpu(c, c.tokens());
        const std::string at = what + " on " + isa_name(isa);
        EXPECT_TRUE(close(whole.out, tokenwise.out, kTol)) << at << ": out against the token-by-token form";
        EXPECT_TRUE(close(whole.state, tokenwise.state, kTol)) << at << ": state against the token-by-token form";
        EXPECT_TRUE(close(whole.out, want.out, kTol)) << at << ": out against the reference";
        EXPECT_TRUE(close(whole.state, want.state, kTol)) << at << ": state against the reference";
    }
}

std::vector<int32_t> one_slot(int64_t n) { return std::vector<int32_t>(size_t(n), 0); }

// Every test here runs the chunked form (the default is token by token: recurrent.h).
class DeltaChunk : public ::testing::Test {
protected:
    void SetUp() override { set_delta_rule_form(DeltaRuleForm::chunked); }
    void TearDown() override { set_delta_rule_form(was_); }
    DeltaRuleForm was_ = delta_rule_form();
};

TEST_F(DeltaChunk, RunLengthsAroundTheChunkAgreeWithTheRecurrence) {
    std::mt19937 rng(71);
    for (int64_t n : {int64_t(1), int64_t(2), C - 1, C, C + 1, 3 * C + 5})
        for (int32_t d : {3, 17, 64}) {
            const Case c = make_case(2, 4, d, 1, one_slot(n), rng);
            expect_agrees(c, std::to_string(n) + " tokens of head size " + std::to_string(d));
        }
}

TEST_F(DeltaChunk, WideHeadsAgreeWithTheRecurrence) {
    std::mt19937 rng(72);
    expect_agrees(make_case(1, 2, 128, 1, one_slot(2 * C + 9), rng), "head size 128");
}

TEST_F(DeltaChunk, InterleavedSlotsAgreeAndStayApart) {
    std::mt19937 rng(73);
    std::vector<int32_t> rows;
    for (int i = 0; i < 150; ++i) rows.push_back(std::uniform_int_distribution<int32_t>(0, 2)(rng));
    rows.push_back(3);  // slot 3: a decode row beside the prefills
    const Case c = make_case(2, 6, 16, 4, rows, rng);
    expect_agrees(c, "four slots interleaved");
    // Slot 0's rows alone give bitwise its outputs and state in the mixed call.
    Case alone = c;
    alone.rows.clear(), alone.q.clear(), alone.k.clear(), alone.v.clear(), alone.g.clear(), alone.beta.clear();
    const int64_t dk = 2 * 16, dv = 6 * 16;
    std::vector<int64_t> mine;
    for (int64_t t = 0; t < c.tokens(); ++t) {
        if (c.rows[size_t(t)] != 0) continue;
        mine.push_back(t);
        alone.rows.push_back(0);
        auto take = [&](std::vector<float>& to, const std::vector<float>& from, int64_t w) {
            to.insert(to.end(), from.begin() + t * w, from.begin() + (t + 1) * w);
        };
        take(alone.q, c.q, dk), take(alone.k, c.k, dk), take(alone.v, c.v, dv), take(alone.g, c.g, 6),
            take(alone.beta, c.beta, 6);
    }
    const Result mixed = run_cpu(c, c.tokens()), single = run_cpu(alone, alone.tokens());
    std::vector<float> picked;
    for (int64_t t : mine) picked.insert(picked.end(), mixed.out.begin() + t * dv, mixed.out.begin() + (t + 1) * dv);
    EXPECT_TRUE(bitwise(single.out, picked));
    const size_t slot = size_t(dv * 16);
    EXPECT_TRUE(bitwise(std::vector<float>(single.state.begin(), single.state.begin() + long(slot)),
                        std::vector<float>(mixed.state.begin(), mixed.state.begin() + long(slot))));
}

TEST_F(DeltaChunk, AStateContinuesAcrossCalls) {
    std::mt19937 rng(74);
    const Case c = make_case(1, 3, 32, 1, one_slot(C + 37), rng);
    const Result want = run_reference(c), token = run_cpu(c, 1);
    for (int64_t first : {int64_t(5), C, C + 30}) {
        const int64_t dv = 3 * 32;
        Result r{std::vector<float>(size_t(c.tokens() * dv)), c.state};
        run_rows(c, 0, first, r.state, r.out, 0, 3);
        run_rows(c, first, c.tokens() - first, r.state, r.out, 0, 3);
        EXPECT_TRUE(close(r.out, token.out, kTol)) << "split after " << first;
        EXPECT_TRUE(close(r.state, token.state, kTol)) << "split after " << first;
        EXPECT_TRUE(close(r.out, want.out, kTol)) << "split after " << first;
        EXPECT_TRUE(close(r.state, want.state, kTol)) << "split after " << first;
    }
}

TEST_F(DeltaChunk, StrongAndNoDecayBetaZeroAndOne) {
    std::mt19937 rng(75);
    const std::pair<Decay, const char*> decays[] = {{Decay::strong, "g = -30"}, {Decay::none, "g = 0"}};
    const std::pair<Beta, const char*> betas[] = {{Beta::zero, "beta 0"}, {Beta::one, "beta 1"}, {Beta::random, "beta random"}};
    for (auto [decay, dname] : decays)
        for (auto [beta, bname] : betas) {
            const Case c = make_case(2, 4, 24, 1, one_slot(2 * C + 3), rng, decay, beta);
            expect_agrees(c, std::string(dname) + ", " + bname);
        }
    // With beta 0 nothing is written: the state only decays and each output reads the decayed start.
    const Case c = make_case(1, 1, 8, 1, one_slot(C + 1), rng, Decay::none, Beta::zero);
    const Result r = run_cpu(c, c.tokens());
    EXPECT_TRUE(bitwise(r.state, c.state));
    // Strong decay forgets the starting state within one token: the state is what the chunk wrote.
    const Case s = make_case(1, 1, 8, 1, one_slot(3), rng, Decay::strong, Beta::one);
    Case fresh = s;
    std::fill(fresh.state.begin(), fresh.state.end(), 0.0f);
    EXPECT_TRUE(close(run_cpu(s, 3).state, run_cpu(fresh, 3).state, 1e-6));
}

TEST_F(DeltaChunk, HeadsSplitAmongCallersGiveBitwiseTheSameResults) {
    std::mt19937 rng(76);
    const Case c = make_case(2, 6, 16, 2, std::vector<int32_t>{0, 0, 1, 0, 1, 1, 0, 0, 0, 1}, rng);
    const Result whole = run_cpu(c, c.tokens());
    const int64_t dv = 6 * 16;
    Result split{std::vector<float>(size_t(c.tokens() * dv)), c.state};
    for (auto [h0, h1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 4}, {4, 6}})
        run_rows(c, 0, c.tokens(), split.state, split.out, h0, h1);
    EXPECT_TRUE(bitwise(split.out, whole.out));
    EXPECT_TRUE(bitwise(split.state, whole.state));
}

// DeltaRuleForm::recurrent runs every slot token by token: bitwise a call of one row at a time.
TEST_F(DeltaChunk, TheRecurrentFormIsTheTokenByTokenRecurrenceBitwise) {
    std::mt19937 rng(77);
    const Case c = make_case(2, 4, 16, 2, std::vector<int32_t>{0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0}, rng);
    const Result token = run_cpu(c, 1);
    const DeltaRuleForm was = delta_rule_form();
    set_delta_rule_form(DeltaRuleForm::recurrent);
    const Result whole = run_cpu(c, c.tokens());
    set_delta_rule_form(was);
    EXPECT_TRUE(bitwise(whole.out, token.out));
    EXPECT_TRUE(bitwise(whole.state, token.state));
    EXPECT_FALSE(bitwise(run_cpu(c, c.tokens()).out, token.out)) << "the chunked form rounds otherwise";
}

}  // namespace
}  // namespace pagoda::backend::cpu
