#include "tune/amx_threshold.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::tune {

int64_t choose_amx_min_tokens(std::vector<AmxTiming> timings) {
    if (timings.empty()) fail("tune: no AMX timings to choose a threshold from");
    std::sort(timings.begin(), timings.end(), [](const AmxTiming& a, const AmxTiming& b) { return a.tokens < b.tokens; });
    for (size_t i = 0; i < timings.size(); ++i) {
        if (timings[i].tokens < 1) fail("tune: an AMX timing at {} tokens", timings[i].tokens);
        if (i && timings[i].tokens == timings[i - 1].tokens) fail("tune: two AMX timings at {} tokens", timings[i].tokens);
    }
    // From the largest count down: the threshold moves down while AMX keeps winning.
    int64_t threshold = kAmxNever;
    for (size_t i = timings.size(); i-- > 0;) {
        if (!(timings[i].amx_seconds < timings[i].vnni_seconds)) break;
        threshold = timings[i].tokens;
    }
    return threshold;
}

int64_t choose_wide_min_tokens(std::vector<AmxTiming> timings) {
    return std::max(backend::cpu::kDefaultWideMinTokens, choose_amx_min_tokens(std::move(timings)));
}

}  // namespace pagoda::tune
