#include "tune/attention_choice.h"

#include <cmath>

#include "core/error.h"

namespace pagoda::tune {

AttentionChoice choose_attention_method(const std::vector<AttentionTiming>& timings, const Workload& workload) {
    if (timings.empty()) fail("tune: no attention timings to choose a method from");
    const double lp = workload.prompt_tokens, lo = workload.output_tokens;
    // Written to refuse NaN as well as negative lengths and non-positive times.
    if (!(lp >= 0) || !(lo >= 0) || !std::isfinite(lp) || !std::isfinite(lo))
        fail("tune: attention workload of {} prompt and {} output tokens is not one to weigh", lp, lo);
    struct Kind {
        double pairs = 0, simd = 0, amx = 0;
    } prompt, decode;
    for (const auto& t : timings) {
        if (!(t.simd_seconds > 0) || !(t.amx_seconds > 0) || !(t.pairs > 0) || !std::isfinite(t.pairs))
            fail("tune: attention timing '{}' is not positive ({} pairs, simd {} s, amx_bf16 {} s)", t.what, t.pairs,
                 t.simd_seconds, t.amx_seconds);
        Kind& k = t.decode ? decode : prompt;
        k.pairs += t.pairs;
        k.simd += t.simd_seconds;
        k.amx += t.amx_seconds;
    }
    const double prompt_pairs = lp * (lp + 1) / 2, decode_pairs = lo * lp + lo * (lo + 1) / 2;
    AttentionChoice c;
    for (const Kind* k : {&prompt, &decode}) {
        if (k->pairs == 0) continue;  // no shape of this kind was timed
        const double n = k == &prompt ? prompt_pairs : decode_pairs;
        c.simd_seconds += n * (k->simd / k->pairs);
        c.amx_seconds += n * (k->amx / k->pairs);
    }
    if (c.amx_seconds < c.simd_seconds) c.method = backend::cpu::AttentionMethod::amx_bf16;
    return c;
}

}  // namespace pagoda::tune
