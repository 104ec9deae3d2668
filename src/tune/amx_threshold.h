// `pagoda tune`'s choice of the AMX threshold (kernel_plan.h: amx_min_tokens) from timings of one
// weight type's step matmuls with and without AMX tiles at a few token counts. AMX tiles give the
// same bits as the VNNI panels, so only speed decides: the threshold is the smallest measured count
// from which AMX is faster at that count and at every larger one measured; where it never is,
// kAmxNever (no step in practice takes it).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul/matmul.h"

namespace pagoda::tune {

struct AmxTiming {
    int64_t tokens = 0;
    double vnni_seconds = 0, amx_seconds = 0;
};

constexpr int64_t kAmxNever = backend::cpu::kNeverMinTokens;  // the largest threshold a profile holds

// Timings in any order; throws pagoda::Error on none, a repeated count or a non-positive count.
int64_t choose_amx_min_tokens(std::vector<AmxTiming> timings);

// The same rule for the AVX-512 VNNI wide prefill kernel (matmul.h: wide_min_tokens), also bitwise
// its alternative's results: vnni_seconds are the narrow kernel's, amx_seconds the wide one's.
// Returns at least backend::cpu::kDefaultWideMinTokens (smaller steps stream through the narrow kernel).
int64_t choose_wide_min_tokens(std::vector<AmxTiming> timings);

}  // namespace pagoda::tune
