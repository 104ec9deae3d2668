// The sampling flags of `run` and `chat` (llama.cpp's spellings): --temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --seed, each with one default, range and meaning, turned into engine::SamplingParams.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>

#include "apps/cli.h"
#include "engine/sampler.h"

namespace pagoda::app {

struct SamplingFlags {
    float temperature = 0.8f, top_p = 0.95f, min_p = 0.0f, repeat_penalty = 1.0f;
    int top_k = 40;
    int64_t seed = -1;

    void add_to(CLI::App& sub) {
        sub.add_option("--temp", temperature, "Sampling temperature; 0 = greedy")->check(in_range(0.0, 100.0));
        sub.add_option("--top-k", top_k, "Keep the k most likely tokens (0 = off)")->check(in_range(0, 1 << 24));
        sub.add_option("--top-p", top_p, "Nucleus sampling threshold (1 = off)")->check(in_range(0.0, 1.0));
        sub.add_option("--min-p", min_p, "Drop tokens below min-p times the top probability")->check(in_range(0.0, 1.0));
        sub.add_option("--repeat-penalty", repeat_penalty, "Repetition penalty (1 = off)")->check(in_range(0.01, 10.0));
        sub.add_option("--seed", seed, "Random seed (-1: a random seed)");
    }

    engine::SamplingParams params() const {
        engine::SamplingParams sp;
        sp.temperature = temperature;
        sp.top_k = top_k;
        sp.top_p = top_p;
        sp.min_p = min_p;
        sp.repetition_penalty = repeat_penalty;
        if (seed >= 0) sp.seed = uint64_t(seed);
        return sp;
    }
};

}  // namespace pagoda::app
