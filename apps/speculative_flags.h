// The speculative-decoding flags of serve, batch, chat and bench-throughput: prompt-lookup drafts
// (--draft-ngram N, llama.cpp's lookup decoding; vLLM's "ngram" method), turned into
// engine::SpeculativeOptions. Off unless --draft-ngram is given.
#pragma once
#include <CLI/CLI.hpp>

#include "apps/cli.h"
#include "engine/engine_core.h"

namespace pagoda::app {

struct SpeculativeFlags {
    engine::SpeculativeOptions options;

    void add_to(CLI::App& sub) {
        sub.add_option("--draft-ngram", options.ngram_max,
                       "Speculative decoding by prompt lookup: match the last N..--draft-ngram-min tokens earlier in "
                       "the context and verify what followed (0: off). Greedy output is unchanged; it pays where "
                       "outputs copy from their input")
            ->check(in_range(0, 64));
        sub.add_option("--draft-ngram-min", options.ngram_min, "Shortest n-gram a draft may match")->check(in_range(1, 64));
        sub.add_option("--draft-max", options.max_draft,
                       "Drafted tokens per sequence and step at most (adapted to the acceptance below this)")
            ->check(in_range(1, 64));
    }
};

}  // namespace pagoda::app
