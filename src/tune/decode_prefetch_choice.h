// `pagoda tune`'s choice of whether decode attention requests the next tile's K and V rows ahead
// (backend/cpu/attention/attention.h: decode_kv_prefetch). The request never changes a result, only the
// speed, and which way is faster depends on the machine, the model and the attention method:
// measured on a Xeon with AMX, whole decode steps at 2-4 K keys with it: `small` 1.13x under simd and
// 1.38x under amx_bf16, tinyllama level under simd and 1.12x under amx_bf16, while a cold
// micro-benchmark of one attention call ran slower with it. So the choice is made on whole decode
// steps of the model under the profile's attention method (tune/step_timer.h), each shape timed
// with and without.
//
// The rule. Shapes at a long context (where there are tiles to request ahead) and at the
// workload's context (what the served steps mostly see). On where the long-context steps, summed,
// are at least kMinGain faster with it, and the workload's, summed, at most kMaxLoss slower; off
// otherwise (a tie keeps it off: the hardware prefetchers' way is the default). The two bounds are
// the timings' run-to-run spread on a shared host: at the default workload's 114 keys (at most
// one tile to request ahead) four tunes of `small` measured the workload's ratio at 0.98-1.03, so
// a tighter loss bound made the choice flip from run to run on noise.
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
inline constexpr double kDecodePrefetchMaxLoss = 0.03;  // the workload's steps at most 3 % slower

// Throws pagoda::Error on no long-context timing or a time that is not positive and finite.
DecodePrefetchChoice choose_decode_prefetch(const std::vector<DecodePrefetchTiming>& timings);

}  // namespace pagoda::tune
