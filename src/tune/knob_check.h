// `pagoda tune`'s last stage: --max-batched-tokens / --max-seqs from the step curves
// (scheduler_knobs.h), then checked. The model proposes, a measurement disposes: the chosen setting
// is served (TuneOptions::serve_check, the engine on the workload) or, without that hook or when the
// served run gave too few gaps for a p99, its worst step (S decodes and a chunk filling the budget)
// is timed on a model with the chosen threads and block size. A served setting is served twice and
// the mean of the two p99s counts; a timed miss gets a second look (a burst of interference can
// cover one series). A miss replaces the model's value for that setting, the
// measured-over-modelled ratio scales the rest, and the choice is made again, a few rounds at most.
// A pass with room to spare (under 3/4 of the target) means the model overstates the host: its
// ratio (below 1) scales the rest and the fastest setting then predicted to pass is checked, and so
// on up until a check misses; the fastest setting that passed is the choice. Every round is
// recorded for the profile.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/step_model.h"
#include "tune/scheduler_knobs.h"
#include "tune/tuner.h"

namespace pagoda::tune {

struct KnobCheckSetup {
    const TuneOptions& options;
    const StepCurves& curves;
    KnobCandidates candidates;
    int threads = 1;
    int32_t kv_block_size = 16;
    int64_t decode_context = 128;  // context of the timed check's decoding sequences
    int64_t context_limit = 0;     // the model's
    // Opens the model with (threads, max step tokens, tokens the KV pool must hold, block size).
    std::function<std::unique_ptr<model::StepModel>(int, int64_t, int64_t, int32_t)> open;
    std::function<void(const std::string&)> progress_step;
};

// The choice; `record` gets {"rounds": [...], "model_correction", "rule"}.
KnobChoice choose_and_check_knobs(const KnobCheckSetup& setup, nlohmann::json& record);

}  // namespace pagoda::tune
