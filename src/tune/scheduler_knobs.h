// Choosing --max-batched-tokens (M) and --max-seqs (S) from measured step times.
// Inputs: step time against decode batch size, D(B) (B sequences, one token each), and against
// tokens of one prompt chunk, P(C); both piecewise linear between measured points, extended along
// their last segment. The step model: a step with B decodes and a chunk of C prompt tokens costs
//   T(B, C) = D(B) + max(0, P(C) - P0)
// where P0 is P extended along its first segment to 0 tokens: the fixed part of a step (one pass
// over the weights, the per-step overheads), paid once in a mixed step.
// p99 inter-token latency of a setting: its worst step, S decodes plus a chunk filling the budget,
//   itl(M, S) = T(S, M - S)
// (in serving more than 1 % of steps admit a prompt, so the p99 is that step), times the measured
// tail: the curves hold each shape's best time, while a served step's high percentiles are longer by
// the host's own jitter (interrupts, other tenants), which the tuner measures as the ratio of a
// repeated step's 95th-percentile time to its best (StepCurves::tail). Throughput under a
// workload of prompts of Lp tokens and outputs of Lo tokens with S' = min(S, concurrency) sequences:
// every Lo decode steps the S' sequences are replaced, and their prompts are computed in chunks of
// c = min(M - S', Lp) tokens, k = ceil(Lp / c) chunks each:
//   tokens/s(M, S) = S' Lo / (Lo D(S') + S' k (P(Lp / k) - P0))
// The choice maximises tokens/s among settings with itl <= target (ties: the first in candidate
// order, smaller M then smaller S); when none meets the target, the setting with the lowest itl.
// Measured settings (KnobMeasurements: the tuner times a chosen setting's worst step and feeds its
// high percentile back) use that value instead of the model's, and the model's value of every other
// setting is scaled by the tuner's model correction, a measured-over-modelled ratio (the model's
// error is mostly systematic: a step of decodes and prompt tokens is not exactly the sum of the two
// curves); above 1 after a miss, below 1 when a pass with room lets the tuner look further up.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace pagoda::tune {

struct Curve {
    std::vector<std::pair<double, double>> points;  // (x, seconds), increasing x, at least one point
    double at(double x) const;
    double at_zero() const;  // the first segment extended to x = 0, within [0, first value]
    // Lowers each point to the least value at it or any larger x. A step never gets cheaper with
    // more tokens, and on a shared host interference only adds time, so a point above a later one
    // was disturbed: the later measurement bounds it.
    void make_monotone();
};

struct StepCurves {
    Curve decode;   // x: sequences decoding in the step
    Curve prefill;  // x: prompt tokens in the step
    double tail = 1.0;  // a step's high-percentile time over its best (>= 1)
};

// The q-quantile (0 < q <= 1) of samples by nearest rank (the ceil(q n)-th smallest); 0 when empty.
double nearest_rank(std::vector<double> samples, double q);
// The tail of repeated timings of one step: their 95th percentile (nearest rank) over their
// minimum, at least 1 (1 for fewer than 2 samples).
double tail_ratio(const std::vector<double>& samples);

struct Workload {
    double prompt_tokens = 80;    // bench-throughput's default 32:128
    double output_tokens = 68;    // --output-len 8:128
    int32_t concurrency = 0;  // 0: as many as max_seqs allows
};

struct KnobCandidates {
    std::vector<int64_t> max_batched_tokens = {8, 16, 32, 64, 128, 256, 512, 1024, 2048};
    std::vector<int32_t> max_seqs = {1, 2, 4, 8, 16, 32, 64};
};

struct KnobChoice {
    int64_t max_batched_tokens = 0;
    int32_t max_seqs = 0;
    double p99_itl_s = 0;
    double tokens_per_s = 0;
    bool target_met = false;
};

struct KnobMeasurements {
    std::map<std::pair<int64_t, int32_t>, double> p99_itl_s;  // (max_batched_tokens, max_seqs) -> measured
    double model_correction = 1.0;                            // > 0: scales unmeasured settings' p99
};

// The step that sets a sequence's worst gap between two tokens under these knobs: every seat
// decoding beside the largest prompt chunk the budget leaves; with one seat, a decode alone (a lone
// sequence's prompt chunks all run before its first token, never between two of its tokens).
struct WorstGapStep {
    int32_t decodes = 0;
    int64_t prompt_tokens = 0;
};
WorstGapStep worst_gap_step(int64_t max_batched_tokens, int32_t max_seqs);

double modelled_step_seconds(const StepCurves& c, double decodes, double prompt_tokens);  // best time
double modelled_p99_itl(const StepCurves& c, int64_t max_batched_tokens, int32_t max_seqs);  // of worst_gap_step
double modelled_tokens_per_s(const StepCurves& c, const Workload& w, int64_t max_batched_tokens, int32_t max_seqs);
// Throws pagoda::Error when the curves are empty or the candidates leave nothing to choose.
KnobChoice choose_scheduler_knobs(const StepCurves& c, double target_itl_s, const Workload& w,
                                  const KnobCandidates& candidates = {}, const KnobMeasurements& measured = {});

}  // namespace pagoda::tune
