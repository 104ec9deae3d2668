// 3c. Where the packed decode kernels request their weight lines ahead (weight_prefetch_choice.h):
// whole decode steps at the workload's context, one sequence and a batch, l1 and l2 in alternating
// rounds (best of each).
#include <algorithm>
#include <cstdlib>
#include <vector>
#include <fmt/format.h>

#include "backend/cpu/matmul/weight_prefetch.h"
#include "kv/kv_layout.h"
#include "tune/step_timer.h"
#include "tune/tune_run.h"
#include "tune/weight_prefetch_choice.h"

namespace pagoda::tune {

using nlohmann::json;
using backend::cpu::WeightPrefetch;

namespace {

// The level installed when it was made, put back when it goes (the timings switch it).
struct WeightPrefetchRestored {
    WeightPrefetch saved = backend::cpu::weight_prefetch();
    ~WeightPrefetchRestored() { backend::cpu::set_weight_prefetch(saved); }
};

}  // namespace

void tune_weight_prefetch(TuneRun& run) {
    const TuneOptions& o = run.options;
    Profile& p = run.profile;
    if (backend::cpu::weight_prefetch_in_environment()) {
        run.step("decode weight prefetch: not measured (PAGODA_WEIGHT_PREFETCH pins it)");
        run.skip(kWeightPrefetchSteps - 1);
        p.measurements["weight_prefetch"] = {{"measured", false}, {"why", "PAGODA_WEIGHT_PREFETCH pins it"}};
        return;
    }
    const WeightPrefetchRestored restored;
    const int32_t bs = kv::kDefaultBlockSize;
    const std::vector<int32_t> batches = {1, o.quick ? 4 : 8};
    auto m = run.open(p.threads, 64, int64_t(batches.back()) * (1024 + run.step_reps + 2 + bs) + 2 * bs, bs);
    const int64_t room = std::max<int64_t>(1, m->info().max_context - run.step_reps - 2);
    const int64_t ctx = std::clamp<int64_t>(int64_t(o.workload.prompt_tokens + o.workload.output_tokens / 2), 1, room);
    std::vector<WeightPrefetchTiming> timings;
    json cases_j = json::array();
    for (const int32_t b : batches) {
        const std::string what = fmt::format("{} sequence{} at {}", b, b == 1 ? "" : "s", ctx);
        run.step("decode weight prefetch, " + what + ": l1 against l2");
        double l1 = 1e300, l2 = 1e300;
        for (int round = 0; round < (o.quick ? 2 : 4); ++round)
            for (const bool into_l2 : {round % 2 == 1, round % 2 == 0}) {  // l1 first, then l2 first
                backend::cpu::set_weight_prefetch(into_l2 ? WeightPrefetch::l2 : WeightPrefetch::l1);
                double& best = into_l2 ? l2 : l1;
                best = std::min(best, time_step(*m, {b, ctx, 0}, run.step_reps));
            }
        timings.push_back({what, l1, l2});
        cases_j.push_back({{"case", what}, {"sequences", b}, {"context", ctx}, {"l1_seconds", l1}, {"l2_seconds", l2}});
    }
    const WeightPrefetchChoice c = choose_weight_prefetch(timings);
    p.plan.weight_prefetch = c.level;
    p.measurements["weight_prefetch"] = {
        {"cases", cases_j},
        {"l1_over_l2", c.l1_over_l2},
        {"chosen", backend::cpu::weight_prefetch_name(c.level)},
        {"rule", fmt::format("l1 where the decode steps (summed over the batch sizes) are at least {:.0f} % faster "
                             "with it; l2 otherwise",
                             kWeightPrefetchMinGain * 100)}};
}

}  // namespace pagoda::tune
