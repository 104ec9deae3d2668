// Turning a step's plan into the model's Batch: each chunk's tokens (and the draft tokens it
// verifies after them) with their positions, KV slots and which rows want logits or pooled hidden
// states. A request scheduled for the first time gets its queue time and cached-prompt count here.
#pragma once
#include <vector>

#include "engine/clock.h"
#include "engine/request_state.h"
#include "engine/scheduler.h"
#include "kv/block_manager.h"
#include "model/batch.h"

namespace pagoda::engine {

// Fills `batch` (cleared first) for `plan`; `step_start` is the step's start, the end of the
// queue time of requests first scheduled in it. Returns how many requests start in it.
int64_t build_batch(const StepPlan& plan, const kv::BlockManager& blocks, Clock::time_point step_start,
                 model::Batch& batch);

// The requests of the plan's chunks, each once, in chunk order (the ones a failed step fails).
std::vector<RequestState*> requests_in(const StepPlan& plan);

}  // namespace pagoda::engine
