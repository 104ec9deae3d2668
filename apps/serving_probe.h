// The served check `pagoda tune` asks of a setting (tune/tuner.h: ServeCheck): the engine with the
// setting's scheduler knobs, threads and KV block size, on a synthetic workload drawn from the
// workload's mean lengths, and the inter-token gaps it produced. Greedy, end tokens ignored, random
// prompt tokens (no prefix-cache hits), requests admitted as slots free up.
#pragma once
#include <cstdint>
#include <string>

#include "tune/tuner.h"

namespace pagoda::app {

// Lengths are drawn uniformly from [lo, 2 * mean - lo] with lo = 0.4 * mean for prompts and
// 0.12 * mean for outputs (at the defaults, 80 and 68: bench-throughput's 32:128 and 8:128).
// Requests: twice the concurrency (the workload's, else max_seqs), at least 16, or as many as fit in
// check.max_seconds: then no more are admitted and those in flight are cancelled (a large model's
// check stays bounded; the gaps they produced count).
tune::ServedFigures probe_serving(const std::string& model_path, const tune::ServingCheck& check, uint64_t seed = 1);

}  // namespace pagoda::app
