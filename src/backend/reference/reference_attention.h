// One query head of the reference backend's attention, in double, over key slots the caller chose
// (the sequence's causal range, a sliding window, or the whole sequence for encoders).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/reference/reference_kv_cache.h"

namespace pagoda::backend::reference {

// One query head over the given key slots: scaled (and capped) scores, plus bias[j] where `bias`
// is not empty (ALiBi: one value per slot), softmax (with the head's sink logit in the denominator
// when given), sum of V rows.
void attend_head(const ReferenceKvCache& cache, int32_t layer, int32_t kv_head, const std::vector<int64_t>& slots,
                 const double* q, const AttentionParams& params, double* out, const double* sink,
                 const std::vector<double>& bias = {});

}  // namespace pagoda::backend::reference
