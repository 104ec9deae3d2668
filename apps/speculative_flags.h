// The speculative-decoding flags of run, serve, batch, chat and bench-throughput: prompt-lookup
// drafts (--draft-ngram N, llama.cpp's lookup decoding; vLLM's "ngram" method) or a draft model
// (--draft-model FILE, llama.cpp's -md, with --draft-profile FILE its own kernel plan), turned into
// engine::SpeculativeOptions. Off unless one is given; the two exclude each other.
#pragma once
#include <CLI/CLI.hpp>

#include "apps/cli.h"
#include "apps/draft_model_loader.h"
#include "core/error.h"
#include "engine/engine_core.h"

namespace pagoda::app {

struct SpeculativeFlags {
    engine::SpeculativeOptions options;
    std::string draft_model;
    std::string draft_profile;  // --draft-profile: the draft's own `pagoda tune` profile (empty: none)

    void add_to(CLI::App& sub) {
        auto* ngram = sub.add_option("--draft-ngram", options.ngram_max,
                       "Speculative decoding by prompt lookup: match the last N..--draft-ngram-min tokens earlier in "
                       "the context and verify what followed (0: off). Greedy output is unchanged; it pays where "
                       "outputs copy from their input")
            ->check(in_range(0, 64));
        sub.add_option("--draft-model", draft_model,
                       "Speculative decoding with a draft model: a smaller GGUF of the same vocabulary (e.g. a Q4_0 copy "
                       "or a smaller sibling) proposes tokens greedily and the model verifies them in one pass. Greedy "
                       "output is unchanged; sampled output keeps the model's distribution")
            ->check(CLI::ExistingFile)
            ->excludes(ngram);
        sub.add_option("--draft-profile", draft_profile,
                       "A `pagoda tune` profile measured with the draft model: its kernel plan runs the draft's CPU "
                       "backend (the model keeps --profile's); without it the draft runs the model's plan")
            ->check(CLI::ExistingFile);
        sub.add_option("--draft-ngram-min", options.ngram_min, "Shortest n-gram a draft may match")->check(in_range(1, 64));
        sub.add_option("--draft-max", options.max_draft,
                       "Drafted tokens per sequence and step at most (adapted to the acceptance below this)")
            ->check(in_range(1, 64));
    }
    bool enabled() const { return options.enabled() || !draft_model.empty(); }

    // The engine's options, with the draft model (if any) opened beside `target`, which was opened
    // with `target_options`.
    engine::SpeculativeOptions resolve(const tokenizer::Tokenizer& vocab, const model::StepModel& target,
                                       const model::StepModelOptions& target_options) const {
        engine::SpeculativeOptions o = options;
        if (!draft_profile.empty() && draft_model.empty()) fail("--draft-profile needs --draft-model");
        if (!draft_model.empty()) {
            o.draft_model = open_draft_model(draft_model, vocab, target, target_options, draft_profile);
            o.draft_max_step_tokens = target_options.max_step_tokens;
        }
        return o;
    }
};

}  // namespace pagoda::app
