// The backend conformance suite (conformance.h): attn_temperature, Llama 4's attention temperature on
// the queries (backend/backend.h: x[t] *= 1 + beta ln(1 + floor(pos_t / length))), against the
// reference at positions on both sides of several floor boundaries, and its batch invariance. A
// backend that declares no attn_temperature is skipped naming the op (the model layer refuses such
// models on it at load).
#include <algorithm>

#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

#define SKIP_WITHOUT_TEMPERATURE()                   \
    if (!test->supports(OpKind::attn_temperature)) \
    GTEST_SKIP() << GetParam() << ": declares no attn_temperature"

// Two sequences whose positions cross the boundaries at multiples of `length` (and position 0).
Step crossing_step(int32_t length, std::mt19937& rng) {
    Step step = make_tables({3 * length + 2, 2 * length + 3}, 4, rng);
    step.add_tokens(0, std::max(0, length - 2), 3 * length + 2);
    step.add_tokens(1, 0, 2 * length + 3);
    return step;
}

TEST_P(Conformance, AttnTemperatureMatchesTheReference) {
    SKIP_WITHOUT_TEMPERATURE();
    std::mt19937 rng(41);
    for (const AttnTemperature temp : {AttnTemperature{0.1f, 8}, AttnTemperature{0.7f, 3}, AttnTemperature{-0.05f, 1}}) {
        const Step step = crossing_step(temp.length, rng);
        const int64_t cols = uniform(1, 300, rng);
        const std::vector<float> x = random_values(step.n_tokens() * cols, rng, 2.0f);
        auto [got, want] = both([&](Side& s) {
            s->begin_step(step.inputs());
            const Tensor t = s.input(step.n_tokens(), cols, x);
            s->attn_temperature(t, temp);
            return s.read(t);
        });
        EXPECT_TRUE(close(got, want, kOpTolerance)) << "beta " << temp.beta << " length " << temp.length << " cols " << cols;
    }
}

// Each row's factor depends on its own position only: a row alone gives bitwise what it gives among
// the step's others.
TEST_P(Contract, AttnTemperatureIsBatchInvariant) {
    SKIP_WITHOUT_TEMPERATURE();
    std::mt19937 rng(42);
    const AttnTemperature temp{0.3f, 5};
    const Step step = crossing_step(temp.length, rng);
    const int64_t cols = 131;
    const std::vector<float> x = random_values(step.n_tokens() * cols, rng, 2.0f);
    test.reset();
    test->begin_step(step.inputs());
    const Tensor all = test.input(step.n_tokens(), cols, x);
    test->attn_temperature(all, temp);
    const std::vector<float> together = test.read(all);
    for (int64_t r : {int64_t(0), int64_t(4), int64_t(9), step.n_tokens() - 1}) {
        Step one = step;
        one.tokens = {step.tokens[size_t(r)]};
        one.positions = {step.positions[size_t(r)]};
        one.seq_index = {step.seq_index[size_t(r)]};
        one.slots = {step.slots[size_t(r)]};
        one.logit_rows = {0};
        test.reset();
        test->begin_step(one.inputs());
        const Tensor t = test.input(1, cols, {x.begin() + r * cols, x.begin() + (r + 1) * cols});
        test->attn_temperature(t, temp);
        EXPECT_TRUE(bitwise(test.read(t), {together.begin() + r * cols, together.begin() + (r + 1) * cols})) << "row " << r;
    }
}

TEST_P(Contract, AttnTemperatureRefusesANonPositiveLength) {
    SKIP_WITHOUT_TEMPERATURE();
    std::mt19937 rng(43);
    const Step step = crossing_step(4, rng);
    test.reset();
    test->begin_step(step.inputs());
    const Tensor t = test.input(step.n_tokens(), 3, std::vector<float>(size_t(step.n_tokens()) * 3, 1.0f));
    try {
        test->attn_temperature(t, {0.1f, 0});
        FAIL() << "a zero length was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("attn_temperature: the length 0 must be positive"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace pagoda::backend::conformance
