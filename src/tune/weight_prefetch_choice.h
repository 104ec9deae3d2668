// `pagoda tune`'s choice of where the packed decode kernels request their weight lines ahead, L1 or
// L2 (backend/cpu/matmul/weight_prefetch.h). The request never changes a result, only the speed, and
// which way is faster depends on the machine's caches: on the AMD Zen 4 host a call ahead does not
// fit its L1 beside the lines in use, and L2 measured 1.2-2x the weight GB/s of L1 from memory; the
// Intel hosts the L1 request was tuned on were not measured with L2. So the choice is made on whole
// decode steps of the model (tune/step_timer.h), each batch size timed both ways.
//
// The rule: l1 where the decode steps, summed over the batch sizes, are at least kMinGain faster
// with it; l2 otherwise (a tie keeps the default). The bound is the timings' run-to-run spread on a
// shared host, as for the KV prefetch (decode_prefetch_choice.h).
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/matmul/weight_prefetch.h"

namespace pagoda::tune {

struct WeightPrefetchTiming {
    std::string what;                      // the shape, e.g. "4 sequences at 120" (for the record and errors)
    double l1_seconds = 0, l2_seconds = 0;  // one decode step with each request
};

struct WeightPrefetchChoice {
    backend::cpu::WeightPrefetch level = backend::cpu::WeightPrefetch::l2;
    double l1_over_l2 = 1;  // summed l1 time / summed l2 time
};

inline constexpr double kWeightPrefetchMinGain = 0.03;  // l1 only where at least 3 % faster

// Throws pagoda::Error on no timing or a time that is not positive and finite.
WeightPrefetchChoice choose_weight_prefetch(const std::vector<WeightPrefetchTiming>& timings);

}  // namespace pagoda::tune
