#include "tune/tuner.h"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/plan/kernel_plan.h"
#include "core/cpu_features.h"
#include "core/machine_limits.h"
#include "core/thread_pool.h"
#include "model/model_file.h"
#include "model/model_identity.h"
#include "model/open_step_model.h"
#include "tune/knob_check.h"
#include "tune/machine_identity.h"
#include "tune/tune_run.h"

namespace pagoda::tune {

using nlohmann::json;

std::unique_ptr<model::StepModel> TuneRun::open(int threads, int64_t max_step, int64_t tokens_wanted,
                                                int32_t block_size) const {
    model::StepModelOptions so;
    so.threads = threads;
    so.kv.block_size = block_size;
    so.kv.prefix_caching = false;
    so.tokens_wanted = tokens_wanted;
    so.max_step_tokens = max_step;
    return model::open_step_model(file, so);
}

namespace {

// 1. The machine: streaming-read bandwidth and each path's arithmetic peak.
void tune_machine_limits(TuneRun& run) {
    run.step("machine limits (bandwidth, fp32 / int8 / bf16 / AMX peaks)");
    MachineLimits limits;
    // A 256 MiB buffer still exceeds the last-level caches; faulting in 1 GiB is most of a quick run.
    const ReadScratch scratch(size_t(run.options.quick ? 256 : 1024) << 20);
    const std::span<const uint8_t> scratch_bytes = scratch.bytes();
    const ReadBandwidth read = measure_best_read_bandwidth(run.pool, std::span(&scratch_bytes, 1));
    limits.read_gbps = read.gbps;
    limits.fp32_gflops = measure_fp32_fma_peak(run.pool);
    limits.int8_gops = measure_int8_dot_peak(run.pool);
    limits.bf16_gflops = measure_bf16_dot_peak(run.pool);
    limits.amx_int8_gops = measure_amx_int8_peak(run.pool);
    limits.amx_bf16_gflops = measure_amx_bf16_peak(run.pool);
    json read_by_pattern = json::object();
    const auto patterns = read_patterns();
    for (size_t i = 0; i < patterns.size() && i < read.by_pattern.size(); ++i)
        read_by_pattern[patterns[i].name()] = read.by_pattern[i];
    run.profile.measurements["machine_limits"] = {{"read_gbps", limits.read_gbps},
                                                    {"read_pattern", read.pattern.name()},
                                                    {"read_gbps_by_pattern", read_by_pattern},
                                                    {"fp32_gflops", limits.fp32_gflops},
                                                    {"int8_gops", limits.int8_gops},
                                                    {"bf16_gflops", limits.bf16_gflops},
                                                    {"amx_int8_gops", limits.amx_int8_gops},
                                                    {"amx_bf16_gflops", limits.amx_bf16_gflops},
                                                    {"threads", run.cores},
                                                    {"isa", isa_name(active_isa())}};
}

// 6. --max-batched-tokens / --max-seqs from the curves, then checked (knob_check.h).
void tune_scheduler_knobs(TuneRun& run, const StepCurves& curves, const StepPoints& points, int64_t ctx_limit) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    const int64_t max_c = points.prefill.back();
    const int64_t decode_ctx = points.decode_ctx;
    KnobCandidates cand;
    // Steps of half powers of two between the powers: a latency target usually falls between two
    // powers, and the check below then lands on the largest setting that meets it, not the power under.
    // Budgets from 2: on a slow host (Zen 1, F16) a step of 2 decodes beside a 2-token chunk is what
    // meets 50 ms.
    cand.max_batched_tokens = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048};
    cand.max_seqs = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    cand.max_batched_tokens.erase(std::remove_if(cand.max_batched_tokens.begin(), cand.max_batched_tokens.end(),
                                                 [&](int64_t v) { return v > std::max<int64_t>(max_c, 64); }),
                                  cand.max_batched_tokens.end());
    KnobCheckSetup setup{o, curves, cand, p.threads, p.kv_block_size, decode_ctx, ctx_limit,
                         [&](int threads, int64_t max_step, int64_t tokens_wanted, int32_t block_size) {
                             return run.open(threads, max_step, tokens_wanted, block_size);
                         },
                         [&](const std::string& what) { run.step(what); }};
    json check_j;
    const KnobChoice k = choose_and_check_knobs(setup, check_j);
    p.measurements["scheduler_check"] = check_j;
    p.scheduler.max_batched_tokens = k.max_batched_tokens;
    p.scheduler.max_seqs = k.max_seqs;
    p.scheduler.modelled_p99_itl_ms = k.p99_itl_s * 1000.0;
    p.scheduler.modelled_tokens_per_s = k.tokens_per_s;
    p.scheduler.target_met = k.target_met;
    p.measurements["workload"] = {{"prompt_tokens", o.workload.prompt_tokens},
                                  {"output_tokens", o.workload.output_tokens},
                                  {"concurrency", o.workload.concurrency}};
}

}  // namespace

Profile tune_model(const TuneOptions& o, const TuneProgress& progress) {
    std::shared_ptr<const gguf::File> file = model::open_model_file(o.model);
    Profile p;
    p.machine = current_machine();
    p.model_path = o.model;
    p.model_identity = model::model_identity(*file);
    p.scheduler.target_itl_ms = o.target_itl_ms;
    const int cores = o.max_threads > 0 ? o.max_threads : default_thread_count();
    const MatmulPhase matmuls = matmul_phase(o, *file);
    const StepPoints points = step_points(o.quick);
    // Steps: the machine, a thread count each, the jitter and the knobs; the matmuls; the step
    // points, the mixed step and the block sizes with the knob check; the attention method; the
    // decode KV and weight prefetch.
    size_t total_steps = 1 + size_t(cores) + 2 + matmul_steps(matmuls);
    total_steps += points.decode.size() + points.prefill.size() + 1 + (o.quick ? 2 : 3 + 4);
    total_steps += attention_steps(o.quick) + kDecodePrefetchSteps + kWeightPrefetchSteps;

    ThreadPool pool(cores);
    TuneRun run{o, file, p, pool, cores, o.quick ? 0.002 : 0.03, o.quick ? 2 : 6, progress, 0, total_steps};
    tune_machine_limits(run);
    tune_matmuls(run, matmuls);
    tune_attention_method(run);
    backend::cpu::set_kernel_plan(p.plan);  // what the steps below run with (matmul methods, tiles, attention method)
    tune_threads(run);
    tune_decode_prefetch(run);
    tune_weight_prefetch(run);
    backend::cpu::set_kernel_plan(p.plan);  // the steps below run with the choice
    const MeasuredCurves measured = tune_step_curves(run, points);
    tune_kv_block_size(run, measured.ctx_limit);
    tune_scheduler_knobs(run, measured.curves, points, measured.ctx_limit);
    progress(total_steps, total_steps, "done");
    return p;
}

}  // namespace pagoda::tune
