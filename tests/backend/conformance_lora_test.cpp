// The backend conformance suite (conformance.h), LoRA: lora_add against the reference on random
// segments (several adapters of different ranks over scattered rows, rows with no adapter left
// alone), and its batch invariance: a row's result is bitwise the same alone and among other rows.
#include "backend/conformance.h"

namespace pagoda::backend::conformance {
namespace {

struct HostLora {
    int64_t rank;
    std::vector<float> a, b;
    float scale;
};

std::vector<float> run_lora(Side& s, int64_t n, int64_t in, int64_t out, const std::vector<float>& x,
                            const std::vector<float>& y, const std::vector<HostLora>& adapters,
                            const std::vector<std::vector<int32_t>>& rows) {
    const Tensor xt = s.input(n, in, x), yt = s.input(n, out, y);
    std::vector<LoraSegment> segs;
    for (size_t i = 0; i < adapters.size(); ++i)
        if (!rows[i].empty())
            segs.push_back({adapters[i].a.data(), adapters[i].b.data(), adapters[i].rank, adapters[i].scale, rows[i]});
    s->lora_add(xt, yt, segs);
    return s.read(yt);
}

TEST_P(Conformance, LoraAdd) {
    std::mt19937 rng(47);
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t n = trial == 0 ? 1 : uniform(2, 37, rng), in = uniform(1, 300, rng), out = uniform(1, 300, rng);
        std::vector<HostLora> adapters;
        for (int i = 0, k = uniform(1, 4, rng); i < k; ++i) {
            const int64_t r = uniform(1, 17, rng);
            adapters.push_back({r, random_values(r * in, rng), random_values(out * r, rng), 0.5f + float(i)});
        }
        // Each row: one adapter or none (-1).
        std::vector<std::vector<int32_t>> rows(adapters.size());
        for (int32_t t = 0; t < n; ++t) {
            const int a = uniform(-1, int32_t(adapters.size()) - 1, rng);
            if (a >= 0) rows[size_t(a)].push_back(t);
        }
        const std::vector<float> x = random_values(n * in, rng), y = random_values(n * out, rng);
        auto [got, want] = both([&](Side& s) { return run_lora(s, n, in, out, x, y, adapters, rows); });
        EXPECT_TRUE(close(got, want, 1e-4)) << n << " rows, " << in << " -> " << out;
        // Rows without an adapter are untouched, bitwise.
        std::vector<bool> adapted(size_t(n), false);
        for (const auto& r : rows)
            for (int32_t t : r) adapted[size_t(t)] = true;
        for (int64_t t = 0; t < n; ++t)
            if (!adapted[size_t(t)]) {
                for (int64_t o = 0; o < out; ++o) ASSERT_EQ(got[size_t(t * out + o)], y[size_t(t * out + o)]) << "row " << t;
            }
    }
}

// A row's update is bitwise the same when it is the only row of the step.
TEST_P(Contract, LoraAddIsBatchInvariant) {
    std::mt19937 rng(48);
    const int64_t n = 23, in = 96, out = 130;
    std::vector<HostLora> adapters;
    for (int64_t r : {4, 16, 7}) adapters.push_back({r, random_values(r * in, rng), random_values(out * r, rng), 0.75f});
    std::vector<std::vector<int32_t>> rows(adapters.size());
    for (int32_t t = 0; t < n; ++t)
        if (t % 4 != 3) rows[size_t(t % 3)].push_back(t);
    const std::vector<float> x = random_values(n * in, rng), y = random_values(n * out, rng);
    test.reset();
    const std::vector<float> batched = run_lora(test, n, in, out, x, y, adapters, rows);
    for (int32_t t : {0, 5, 13, 22}) {
        const int a = t % 3;
        std::vector<std::vector<int32_t>> one(adapters.size());
        one[size_t(a)] = {0};
        const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in), yt(y.begin() + t * out, y.begin() + (t + 1) * out);
        test.reset();
        const std::vector<float> alone = run_lora(test, 1, in, out, xt, yt, adapters, one);
        const std::vector<float> in_batch(batched.begin() + t * out, batched.begin() + (t + 1) * out);
        EXPECT_TRUE(bitwise(alone, in_batch)) << "row " << t;
    }
}

}  // namespace
}  // namespace pagoda::backend::conformance
