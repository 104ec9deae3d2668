// `pagoda tune`'s choice of the attention method (backend/cpu/attention_method.h) from timings of
// paged attention under each method on a few shapes of the model (long prompts, decode steps).
// The methods differ in their bits, so like a weight type's matmul method the choice is one for
// every step: the method with the lowest sum of time relative to the faster at each shape. A tie
// keeps simd, which rounds nothing to bf16: amx_bf16 must be faster to be taken.
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/attention_method.h"

namespace pagoda::tune {

struct AttentionTiming {
    std::string what;  // the shape, e.g. "prefill 512 tokens" (for the record)
    double simd_seconds = 0, amx_seconds = 0;
};

struct AttentionChoice {
    kernels::AttentionMethod method = kernels::AttentionMethod::simd;
    double simd_score = 0, amx_score = 0;  // sums of time relative to the faster at each shape
};

// Throws pagoda::Error on no timings or a time that is not positive.
AttentionChoice choose_attention_method(const std::vector<AttentionTiming>& timings);

}  // namespace pagoda::tune
