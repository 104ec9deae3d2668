// Step-time curves for the scheduler-knob tests, chosen so every choice can be worked out by hand:
// D(B) = 9 ms + 1 ms per sequence; P(C) = 10 ms + 0.1 ms per token (P0 = 10 ms), so the modelled
// worst step of --max-batched-tokens M / --max-seqs S is 9 + 0.9 S + 0.1 M ms.
#pragma once
#include "tune/scheduler_knobs.h"

namespace pagoda::tune::test {

inline StepCurves linear_curves() {
    StepCurves c;
    c.decode.points = {{1, 0.010}, {64, 0.073}};
    c.prefill.points = {{1, 0.0101}, {2048, 0.2148}};
    return c;
}

}  // namespace pagoda::tune::test
