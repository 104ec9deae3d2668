#include "tune/attention_choice.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::tune {

AttentionChoice choose_attention_method(const std::vector<AttentionTiming>& timings) {
    if (timings.empty()) fail("tune: no attention timings to choose a method from");
    AttentionChoice c;
    for (const auto& t : timings) {
        // Written to refuse NaN as well as zero and negative times.
        if (!(t.simd_seconds > 0) || !(t.amx_seconds > 0))
            fail("tune: attention timing '{}' is not positive (simd {} s, amx_bf16 {} s)", t.what, t.simd_seconds, t.amx_seconds);
        const double fastest = std::min(t.simd_seconds, t.amx_seconds);
        c.simd_score += t.simd_seconds / fastest;
        c.amx_score += t.amx_seconds / fastest;
    }
    if (c.amx_score < c.simd_score) c.method = kernels::AttentionMethod::amx_bf16;
    return c;
}

}  // namespace pagoda::tune
