#include "tune/decode_prefetch_choice.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::tune {

DecodePrefetchChoice choose_decode_prefetch(const std::vector<DecodePrefetchTiming>& timings) {
    double off[2] = {0, 0}, on[2] = {0, 0};  // [0]: the workload's context, [1]: long
    for (const auto& t : timings) {
        for (double s : {t.off_seconds, t.on_seconds})
            if (!(s > 0) || !std::isfinite(s)) fail("decode prefetch choice: '{}' has a time of {} s", t.what, s);
        off[t.long_context] += t.off_seconds;
        on[t.long_context] += t.on_seconds;
    }
    if (off[1] == 0) fail("decode prefetch choice: no long-context decode step was timed");
    DecodePrefetchChoice c;
    c.long_ratio = on[1] / off[1];
    c.workload_ratio = off[0] > 0 ? on[0] / off[0] : 1.0;
    c.on = c.long_ratio <= 1.0 - kDecodePrefetchMinGain && c.workload_ratio <= 1.0 + kDecodePrefetchMaxLoss;
    return c;
}

}  // namespace pagoda::tune
