// `pagoda tune`: measures this machine and one model and returns the profile that serve, run, bench,
// batch and bench-throughput then load with --profile (tune/profile.h). What it measures, in order:
//  1. the machine: streaming-read bandwidth and each path's arithmetic peak (core/machine_limits.h);
//  2. per weight type in the model's layers, each method this CPU can run (kernel_plan.h), timed on
//     the model's own matmul shapes at 1/4/16/64/512 tokens (quick: 1/4/64); one method per type is
//     kept for every token count (batch invariance, see kernel_plan.h): the one with the lowest sum of
//     time relative to the best at each count. Then GEMM tiles per token range (1, 2-8, 9-64, 65+;
//     quick: 1, 2-8, 9+) by a coordinate search from the defaults; a tile set is kept only when it is
//     at least 3 % faster (less is noise on a shared host);
//  2b. the attention method (attention_choice.h), where AMX bf16 attention runs, PAGODA_ATTENTION is
//     unset and the model's attention is plain (no sliding window, no soft cap, a KV cache type that
//     amx_attention_applies takes): paged attention of the model's heads timed under simd and
//     amx_bf16 on prompts of 512 and 2048 tokens (quick: 512) and decode steps of 1 and 16 sequences
//     at position 1024, capped by the context; the plan carries the one kept, and the steps below
//     run with it installed;
//  3. threads 1..cores: a decode step and a 64-token prompt step through the real StepModel;
//  4. step time against decode batch size and against prompt tokens per step (step_timer.h), and
//     one mixed step to check the step model (scheduler_knobs.h) against a measurement;
//  5. the KV block size: a 16-sequence decode step at 256 tokens of context with blocks of 16, 32, 64
//     (not in --quick: the default 16 stands there);
//  6. --max-batched-tokens / --max-seqs from the curves (scheduler_knobs.h), then checked: the chosen
//     setting is served (TuneOptions::serve_check: the app runs the engine on the workload) or, without
//     that hook, its worst step is timed; a miss feeds the measurement back and the choice is made again.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/plan/path_method.h"
#include "tune/profile.h"
#include "tune/scheduler_knobs.h"

namespace pagoda::tune {

// A served check of one setting. tune stays below the engine (tests/layering), so the command
// supplies the serving: the engine with these knobs, threads and KV block size (the kernel plan is
// installed already) on a synthetic workload of these mean lengths, reporting what it saw.
struct ServingCheck {
    int64_t max_batched_tokens = 0;
    int32_t max_seqs = 0;
    int threads = 1;
    int32_t kv_block_size = 16;
    Workload workload;
    double max_seconds = 30;  // a long run stops here: the requests in flight are cancelled, their gaps kept
};
struct ServedFigures {
    double p99_itl_s = 0;            // p99 of the gaps between consecutive tokens of every request
    double output_tokens_per_s = 0;
    size_t itl_samples = 0;
};
using ServeCheck = std::function<ServedFigures(const ServingCheck&)>;

struct TuneOptions {
    std::string model;
    int max_threads = 0;        // 0: every core pagoda would use (default_thread_count)
    double target_itl_ms = 50;
    bool quick = false;         // fewer points and repetitions: seconds on a tiny model, for tests
    Workload workload;
    ServeCheck serve_check;     // empty: the chosen setting's worst step is timed instead of served
    // The methods measured for each weight type: those of this list that apply to it and run here,
    // or, where none of them does (or the list is empty), every one that does.
    std::vector<backend::cpu::PathMethod> methods;
};

// Called between measurements: (step done, steps in all, what is being measured).
using TuneProgress = std::function<void(size_t done, size_t total, const std::string& what)>;

Profile tune_model(const TuneOptions& options, const TuneProgress& progress);

}  // namespace pagoda::tune
