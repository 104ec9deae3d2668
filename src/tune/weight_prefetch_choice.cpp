#include "tune/weight_prefetch_choice.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::tune {

WeightPrefetchChoice choose_weight_prefetch(const std::vector<WeightPrefetchTiming>& timings) {
    if (timings.empty()) fail("weight prefetch choice: no decode step was timed");
    double l1 = 0, l2 = 0;
    for (const auto& t : timings) {
        for (double s : {t.l1_seconds, t.l2_seconds})
            if (!(s > 0) || !std::isfinite(s)) fail("weight prefetch choice: '{}' has a time of {} s", t.what, s);
        l1 += t.l1_seconds;
        l2 += t.l2_seconds;
    }
    WeightPrefetchChoice c;
    c.l1_over_l2 = l1 / l2;
    c.level = c.l1_over_l2 <= 1.0 - kWeightPrefetchMinGain ? backend::cpu::WeightPrefetch::l1
                                                            : backend::cpu::WeightPrefetch::l2;
    return c;
}

}  // namespace pagoda::tune
