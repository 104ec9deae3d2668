// `pagoda tune`: measures this machine and one model and returns the profile that serve, run, bench,
// batch and bench-throughput then load with --profile (tune/profile.h). What it measures, in order:
//  1. the machine: streaming-read bandwidth and each path's arithmetic peak (core/machine_limits.h);
//  2. per weight type in the model's layers, each method this CPU can run (kernel_plan.h), timed on
//     the model's own matmul shapes at 1/4/16/64/512 tokens (quick: 1/4/64); one method per type is
//     kept for every token count (batch invariance, see kernel_plan.h): the one with the lowest sum of
//     time relative to the best at each count. Then GEMM tiles per token range (1, 2-8, 9-64, 65+;
//     quick: 1, 2-8, 9+) by a coordinate search from the defaults; a tile set is kept only when it is
//     at least 3 % faster (less is noise on a shared host);
//  3. threads 1..cores: a decode step and a 64-token prompt step through the real StepModel;
//  4. step time against decode batch size and against prompt tokens per step (step_timer.h), and
//     one mixed step to check the step model (scheduler_knobs.h) against a measurement;
//  5. the KV block size: a 16-sequence decode step at 256 tokens of context with blocks of 16, 32, 64
//     (not in --quick: the default 16 stands there);
//  6. --max-batched-tokens / --max-seqs from the curves (scheduler_knobs.h).
#pragma once
#include <functional>
#include <string>

#include "tune/profile.h"
#include "tune/scheduler_knobs.h"

namespace pagoda::tune {

struct TuneOptions {
    std::string model;
    int max_threads = 0;        // 0: every core pagoda would use (default_thread_count)
    double target_itl_ms = 50;
    bool quick = false;         // fewer points and repetitions: seconds on a tiny model, for tests
    Workload workload;
};

// Called between measurements: (step done, steps in all, what is being measured).
using TuneProgress = std::function<void(size_t done, size_t total, const std::string& what)>;

Profile tune_model(const TuneOptions& options, const TuneProgress& progress);

}  // namespace pagoda::tune
