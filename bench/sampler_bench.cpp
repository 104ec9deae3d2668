// One sampled token (engine::Sampler::sample) from a row of logits, at the vocabulary sizes of the
// families served (32 000: Llama 2 / Mistral / `small`; 128 256: Llama 3), with the settings clients
// send: temperature 1 and nothing else (the OpenAI API's defaults), temperature 0.8 with top-p 0.95,
// and top-k 40 beside them. Logits: normal with sd 3 (a spread one), so top-p keeps hundreds.
//   build/bench/pagoda_bench --benchmark_filter=BM_Sample
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using pagoda::engine::Sampler;
using pagoda::engine::SamplingParams;

// Arguments: vocabulary, setting (0: temperature 1; 1: 0.8 / top-p 0.95; 2: and top-k 40).
void BM_Sample(benchmark::State& state) {
    const int vocab = int(state.range(0)), setting = int(state.range(1));
    SamplingParams p;
    p.seed = 1;
    if (setting >= 1) {
        p.temperature = 0.8f;
        p.top_p = 0.95f;
    }
    if (setting == 2) p.top_k = 40;
    Sampler sampler(p);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> base(static_cast<size_t>(vocab)), logits;
    for (float& x : base) x = dist(rng);
    const std::vector<int32_t> history = {1, 2, 3};
    int64_t position = int64_t(history.size());  // a fresh position each draw, as in a generation
    for (auto _ : state) {
        state.PauseTiming();
        logits = base;  // the sampler scales its row in place
        state.ResumeTiming();
        benchmark::DoNotOptimize(sampler.sample(logits.data(), vocab, history, position++));
    }
}
BENCHMARK(BM_Sample)->ArgsProduct({{32000, 128256}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

}  // namespace
