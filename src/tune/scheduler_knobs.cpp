#include "tune/scheduler_knobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace pagoda::tune {

double Curve::at(double x) const {
    if (points.empty()) fail("step-time curve: no measurements");
    if (points.size() == 1) return points[0].second * (points[0].first > 0 ? std::max(1.0, x / points[0].first) : 1.0);
    size_t i = 1;
    while (i + 1 < points.size() && x > points[i].first) ++i;
    const auto [x0, y0] = points[i - 1];
    const auto [x1, y1] = points[i];
    const double y = x1 == x0 ? y1 : y0 + (y1 - y0) * (x - x0) / (x1 - x0);
    return std::max(0.0, y);
}

double Curve::at_zero() const {
    if (points.empty()) fail("step-time curve: no measurements");
    if (points.size() == 1) return points[0].second;
    const auto [x0, y0] = points[0];
    const auto [x1, y1] = points[1];
    const double y = x1 == x0 ? y0 : y0 - (y1 - y0) * x0 / (x1 - x0);
    return std::clamp(y, 0.0, y0);
}

void Curve::make_monotone() {
    for (size_t i = points.size(); i-- > 1;) points[i - 1].second = std::min(points[i - 1].second, points[i].second);
}

double modelled_step_seconds(const StepCurves& c, double decodes, double prompt_tokens) {
    const double d = decodes > 0 ? c.decode.at(decodes) : 0.0;
    if (prompt_tokens <= 0) return d;
    const double chunk = c.prefill.at(prompt_tokens);
    if (decodes <= 0) return chunk;
    return d + std::max(0.0, chunk - c.prefill.at_zero());
}

double nearest_rank(std::vector<double> samples, double q) {
    if (samples.empty()) return 0;
    std::sort(samples.begin(), samples.end());
    const size_t rank = size_t(std::ceil(q * double(samples.size())));
    return samples[std::min(samples.size(), std::max<size_t>(rank, 1)) - 1];
}

double tail_ratio(const std::vector<double>& samples) {
    if (samples.size() < 2) return 1.0;
    const double best = *std::min_element(samples.begin(), samples.end());
    if (best <= 0) return 1.0;
    // With 40 samples the 95th percentile is the third largest, so one or two outliers (a page
    // fault, a migration) do not set the margin alone.
    return std::max(1.0, nearest_rank(samples, 0.95) / best);
}

WorstGapStep worst_gap_step(int64_t max_batched_tokens, int32_t max_seqs) {
    // Without the lone-sequence case a host where no chunk beside a decode meets the target (Zen 1
    // with F16 weights) was told that nothing did.
    if (max_seqs <= 1) return {max_seqs, 0};
    return {max_seqs, std::max<int64_t>(0, max_batched_tokens - max_seqs)};
}

double modelled_p99_itl(const StepCurves& c, int64_t max_batched_tokens, int32_t max_seqs) {
    const WorstGapStep w = worst_gap_step(max_batched_tokens, max_seqs);
    return std::max(1.0, c.tail) * modelled_step_seconds(c, w.decodes, double(w.prompt_tokens));
}

double modelled_tokens_per_s(const StepCurves& c, const Workload& w, int64_t max_batched_tokens, int32_t max_seqs) {
    const double s = w.concurrency > 0 ? std::min<double>(max_seqs, w.concurrency) : double(max_seqs);
    const double room = double(max_batched_tokens) - s;
    if (room < 1 || w.output_tokens <= 0 || w.prompt_tokens <= 0) return 0;
    const double chunk = std::min(room, w.prompt_tokens);
    const double k = std::ceil(w.prompt_tokens / chunk);
    const double per_chunk = std::max(0.0, c.prefill.at(w.prompt_tokens / k) - c.prefill.at_zero());
    const double cycle = w.output_tokens * c.decode.at(s) + s * k * per_chunk;
    return cycle > 0 ? s * w.output_tokens / cycle : 0;
}

KnobChoice choose_scheduler_knobs(const StepCurves& c, double target_itl_s, const Workload& w,
                                  const KnobCandidates& candidates, const KnobMeasurements& measured) {
    if (c.decode.points.empty() || c.prefill.points.empty()) fail("scheduler knobs: no step-time measurements");
    const double correction = measured.model_correction > 0 ? measured.model_correction : 1.0;
    KnobChoice best, lowest;
    lowest.p99_itl_s = std::numeric_limits<double>::infinity();
    bool any = false;
    for (int64_t m : candidates.max_batched_tokens)
        for (int32_t s : candidates.max_seqs) {
            if (m <= s) continue;  // a prompt chunk needs room beside the decodes
            const auto hit = measured.p99_itl_s.find({m, s});
            const double itl = hit != measured.p99_itl_s.end()
                                   ? hit->second
                                   : correction * modelled_p99_itl(c, m, s);
            const double tps = modelled_tokens_per_s(c, w, m, s);
            if (tps <= 0) continue;
            any = true;
            if (itl < lowest.p99_itl_s) lowest = {m, s, itl, tps, false};
            if (itl <= target_itl_s && (!best.target_met || tps > best.tokens_per_s)) best = {m, s, itl, tps, true};
        }
    if (!any) fail("scheduler knobs: no candidate leaves room for a prompt chunk beside its decodes");
    return best.target_met ? best : lowest;
}

}  // namespace pagoda::tune
