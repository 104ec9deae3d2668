// The output side of an embedding request: a step's hidden-state rows go to the pooled vectors of
// the embedding requests in it (pooling.h), and a request whose prompt is complete finishes with
// its vector (or with an error when pooling fails).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/output_processor.h"
#include "engine/scheduler.h"

namespace pagoda::engine {

// `hidden`: the step's hidden rows of `hidden_size` values, in batch order (chunk by chunk,
// position by position). Requests that finished are appended to `done`.
void pool_hidden_rows(const StepPlan& plan, const std::vector<float>& hidden, int64_t hidden_size,
                      OutputProcessor& output, std::vector<RequestState*>& done);

}  // namespace pagoda::engine
