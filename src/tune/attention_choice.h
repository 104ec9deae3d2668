// `pagoda tune`'s choice of the attention method (backend/cpu/plan/attention_method.h) from timings of
// paged attention under each method on a few shapes of the model (prompts, decode steps), weighed by
// the workload the profile is tuned for. The methods differ in their bits, so like a weight type's
// matmul method the choice is one for every step (a token's attention must not depend on whether it
// came as a prompt or a decode token), which makes the mix of the two what decides: amx_bf16 is
// several times faster on prompts and, where a KV head serves few query heads, slower on decode.
//
// The rule. Each shape covers a number of (query token, key) pairs; per method, the time per pair
// of the prompt shapes (their times summed over their pairs summed) and of the decode shapes. One
// request of the workload, a prompt of Lp tokens and Lo output tokens, covers Lp (Lp + 1) / 2
// prompt pairs and Lo Lp + Lo (Lo + 1) / 2 decode pairs; its modelled attention time is those
// counts times the method's two rates (a kind with no timed shape adds nothing). The lower time
// wins; a tie keeps simd, which rounds nothing to bf16: amx_bf16 must be faster to be taken.
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/plan/attention_method.h"
#include "tune/scheduler_knobs.h"

namespace pagoda::tune {

struct AttentionTiming {
    std::string what;     // the shape, e.g. "prefill 512 tokens" (for the record and errors)
    bool decode = false;  // one token per sequence; else one sequence's prompt
    double pairs = 0;     // (query token, key) pairs the shape covers
    double simd_seconds = 0, amx_seconds = 0;
};

struct AttentionChoice {
    backend::cpu::AttentionMethod method = backend::cpu::AttentionMethod::simd;
    double simd_seconds = 0, amx_seconds = 0;  // modelled attention time of one request of the workload
};

// Throws pagoda::Error on no timings, a time or pair count that is not positive, or a workload
// length that is negative or not finite.
// workload: the mean request the profile is tuned for (its prompt and output lengths; concurrency is not read).
AttentionChoice choose_attention_method(const std::vector<AttentionTiming>& timings, const Workload& workload);

}  // namespace pagoda::tune
