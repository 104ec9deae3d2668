// The phases of one `pagoda tune` run (tuner.h lists them in order) and the state they share:
// the options, the model file, the profile being filled, the thread pool, the repetition counts
// and the progress count. tune_model (tuner.cpp) runs the phases in order; each writes its choice
// into the profile and its measurements under their key.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/plan/kernel_plan.h"
#include "backend/cpu/matmul/matmul.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/step_model.h"
#include "tune/scheduler_knobs.h"
#include "tune/tuner.h"

namespace pagoda::tune {

struct TuneRun {
    const TuneOptions& options;
    std::shared_ptr<const gguf::File> file;
    Profile& profile;
    ThreadPool& pool;
    int cores = 1;
    double min_seconds = 0;  // per matmul or attention timing
    int step_reps = 0;       // repetitions of a timed step
    const TuneProgress& progress;
    size_t done = 0, total_steps = 0;

    // Reports the next step as begun.
    void step(const std::string& what) { progress(done++, total_steps, what); }
    // A phase that takes fewer steps than counted for it skips the rest.
    void skip(size_t steps) { done += steps; }
    // The model as a real StepModel (no prefix caching) with these threads, step size, KV room
    // and block size.
    std::unique_ptr<model::StepModel> open(int threads, int64_t max_step, int64_t tokens_wanted,
                                           int32_t block_size) const;
};

// One distinct 2-D layer weight shape of a type, and how many layers have it.
struct LayerShape {
    backend::cpu::WeightView view;
    int count = 0;
};

// What the matmul phase measures (tuner.cpp counts its steps from it).
struct MatmulPhase {
    std::map<gguf::GgmlType, std::vector<LayerShape>> shapes;  // per weight type in the layers
    std::map<gguf::GgmlType, std::vector<backend::cpu::PathMethod>> candidates;  // the methods timed, per type
    bool amx_here = false;  // AMX tiles run here (for types that end up on int8_dot)
};

// The model's layer matmul shapes and the methods to time for each type: those of
// options.methods that apply and run here, else every one that does. Throws pagoda::Error when
// the model has no layer weights (tune_matmuls.cpp).
MatmulPhase matmul_phase(const TuneOptions& options, const gguf::File& file);
// The steps the matmul phase reports.
size_t matmul_steps(const MatmulPhase& phase);
// 2. Per weight type: the method, the GEMM tiles per token range and the AMX and wide-kernel
// thresholds, into the profile's kernel plan.
void tune_matmuls(TuneRun& run, const MatmulPhase& phase);

// 2b. The attention method, where amx_bf16 could serve the model (tune_attention.cpp).
size_t attention_steps(bool quick);
void tune_attention_method(TuneRun& run);
// 3b. Whether decode attention prefetches its next K and V rows.
constexpr size_t kDecodePrefetchSteps = 4;  // 2 contexts x 2 batch sizes (one step to say why not)
void tune_decode_prefetch(TuneRun& run);
// 3c. Where the packed decode kernels request their weight lines ahead (tune_weight_prefetch.cpp).
constexpr size_t kWeightPrefetchSteps = 2;  // 2 batch sizes (one step to say why not)
void tune_weight_prefetch(TuneRun& run);

// 3. Threads (tune_steps.cpp).
void tune_threads(TuneRun& run);
// 4. Step time against decode batch size and prompt tokens per step, a mixed step against the
// model, and the host's jitter.
struct StepPoints {
    std::vector<int32_t> decode;   // batch sizes
    std::vector<int64_t> prefill;  // prompt tokens per step
    int64_t decode_ctx = 0;        // context of the timed decodes
};
StepPoints step_points(bool quick);
struct MeasuredCurves {
    StepCurves curves;
    int64_t ctx_limit = 0;  // the timing model's context
};
MeasuredCurves tune_step_curves(TuneRun& run, const StepPoints& points);
// 5. The KV block size.
void tune_kv_block_size(TuneRun& run, int64_t ctx_limit);

}  // namespace pagoda::tune
