// `pagoda tune`'s choice of whether decode attention requests the next tile's K and V rows ahead
// (backend/cpu/attention.h: decode_kv_prefetch). The request never changes a result, only the
// speed, and which way is faster depends on the machine and the model: measured on a Xeon with AMX,
// whole `small` decode steps at 1-4 K keys 1.13-1.18x faster with it, tinyllama's level, while a
// cold micro-benchmark of one attention call ran slower with it. So the choice is made on whole
// decode steps of the model (tune/step_timer.h), each shape timed with and without.
//
// The rule. Shapes at a long context (where there are tiles to request ahead) and at the
// workload's context (what the served steps mostly see). On where the long-context steps, summed,
// are at least kMinGain faster with it, and the workload's, summed, at most kMaxLoss slower; off
// otherwise (a tie keeps it off: the hardware prefetchers' way is the default).
#pragma once
#include <string>
#include <vector>

namespace pagoda::tune {

struct DecodePrefetchTiming {
    std::string what;     // the shape, e.g. "8 sequences at 1024" (for the record and errors)
    bool long_context = false;  // a long-context shape; else one at the workload's context
    double off_seconds = 0, on_seconds = 0;  // one decode step without and with the requests
};

struct DecodePrefetchChoice {
    bool on = false;
    double long_ratio = 1, workload_ratio = 1;  // summed on / summed off time of each kind (1 where none)
};

inline constexpr double kDecodePrefetchMinGain = 0.03;  // long-context steps at least 3 % faster
inline constexpr double kDecodePrefetchMaxLoss = 0.01;  // the workload's steps at most 1 % slower

// Throws pagoda::Error on no long-context timing or a time that is not positive and finite.
DecodePrefetchChoice choose_decode_prefetch(const std::vector<DecodePrefetchTiming>& timings);

}  // namespace pagoda::tune
