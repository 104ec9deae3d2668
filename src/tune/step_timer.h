// Times forward steps of a real StepModel with a chosen shape, for `pagoda tune`: B sequences that
// each decode one token at a given context length, plus (optionally) one prompt chunk of C tokens.
// The KV contents are whatever the pool holds (the timing does not depend on the values); block
// tables, slots and positions are real, so attention walks as many blocks as a served step would.
#pragma once
#include <cstdint>
#include <vector>

#include "model/step_model.h"

namespace pagoda::tune {

struct StepShape {
    int32_t decodes = 0;         // sequences decoding one token each
    int64_t context = 0;         // tokens each decoding sequence already has
    int64_t prompt_tokens = 0;   // one chunk of a new prompt computed in the same step
};

// The minimum over `reps` timed steps (after one warm-up) in seconds: the minimum, because the
// host is shared and interference only ever adds time. Throws when the KV pool cannot hold the shape.
double time_step(model::StepModel& model, const StepShape& shape, int reps);
// Every one of the `reps` timed steps (after one warm-up), in order, in seconds: the spread is what
// the served steps will see (the minimum above is what the model's curves are made of).
std::vector<double> step_samples(model::StepModel& model, const StepShape& shape, int reps);

}  // namespace pagoda::tune
