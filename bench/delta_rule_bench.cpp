// The CPU gated delta rule (backend/cpu/ops/recurrent.h) over one prefill of 512 tokens of one
// sequence, one thread: the chunked form (the whole call) against its unfused twin, the token-by-token
// recurrence (one row per call, as decode runs it). Args: head size (64: the `small` preset; 128:
// Qwen3.5's), value heads, chunked (1) or token by token (0). Counter tok/s = prefill tokens per second
// of one layer's heads.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "backend/cpu/ops/recurrent.h"

namespace {

constexpr int64_t kTokens = 512;

void BM_GatedDeltaRule(benchmark::State& state) {
    const int32_t d = int32_t(state.range(0)), hv = int32_t(state.range(1));
    const bool chunked = state.range(2) != 0;
    const int32_t hk = hv / 2;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_real_distribution<float> log_decay(-1.f, 0.f), unit(0.1f, 0.9f);
    auto values = [&](int64_t n) {
        std::vector<float> x(static_cast<size_t>(n));
        for (auto& v : x) v = normal(rng);
        return x;
    };
    const std::vector<float> q = values(kTokens * hk * d), k = values(kTokens * hk * d), v = values(kTokens * hv * d);
    std::vector<float> g(size_t(kTokens * hv)), beta(g.size()), out(size_t(kTokens * hv * d));
    for (size_t i = 0; i < g.size(); ++i) g[i] = log_decay(rng), beta[i] = unit(rng);
    std::vector<float> s(size_t(int64_t(hv) * d * d), 0.f);
    const std::vector<int32_t> rows(size_t(kTokens), 0);
    pagoda::backend::GatedDeltaRule op{hk, hv, d, 1.f / std::sqrt(float(d)), 1e-6f, rows};
    for (auto _ : state) {
        if (chunked) {  // the chunked form chosen for the call (PAGODA_DELTA_RULE=chunked)
            pagoda::backend::cpu::set_delta_rule_form(pagoda::backend::cpu::DeltaRuleForm::chunked);
            pagoda::backend::cpu::gated_delta_rule_f32(op, kTokens, q.data(), k.data(), v.data(), g.data(),
                                                       beta.data(), s.data(), out.data(), 0, hv);
        } else {
            for (int64_t t = 0; t < kTokens; ++t) {
                pagoda::backend::GatedDeltaRule one = op;
                one.state_rows = std::span(rows).subspan(size_t(t), 1);
                pagoda::backend::cpu::gated_delta_rule_f32(one, 1, q.data() + t * hk * d, k.data() + t * hk * d,
                                                           v.data() + t * hv * d, g.data() + t * hv,
                                                           beta.data() + t * hv, s.data(), out.data() + t * hv * d,
                                                           0, hv);
            }
        }
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["tok/s"] = benchmark::Counter(double(kTokens), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_GatedDeltaRule)
    ->ArgNames({"head", "heads", "chunked"})
    ->Args({64, 12, 0})
    ->Args({64, 12, 1})
    ->Args({128, 32, 0})
    ->Args({128, 32, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
