// What makes a request invalid or impossible to serve on this engine: an empty or out-of-vocabulary
// prompt, one that leaves no room to generate (or, to embed, does not fit), limits out of range,
// stop strings or a grammar without a tokenizer, options an embedding does not take.
#pragma once
#include <cstdint>

#include "engine/request.h"
#include "model/step_model.h"

namespace pagoda::engine {

// Throws pagoda::Error naming the problem. context_limit: the longest sequence allowed; max_seqs:
// the scheduler's (n may not exceed it).
void validate_request(const Request& request, const model::StepModelInfo& info, int64_t context_limit,
                      int32_t max_seqs, bool has_tokenizer);

}  // namespace pagoda::engine
